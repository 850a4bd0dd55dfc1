"""Page 7 · Correct → fast, "what comes next" through AppTest in both languages: the layout table, the article's
batch in FlashInfer's page-table form, split-K, and the outside kernels skipped with their reason on a machine
without a CUDA GPU."""

from __future__ import annotations

import pytest

from benchmarks.external import EXTERNAL_RUNGS
from ui.strings import t

from .app_util import app_test

FAST = "app_pages/7_Correct_to_fast.py"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_what_comes_next_explains_and_skips_without_a_gpu(lang):
    at = app_test(FAST, lang).run()
    assert not at.exception, [e.value for e in at.exception]
    assert t("beyond.header", lang) in [e.label for e in at.expander]  # folded (issue 38)
    text = "\n".join(m.value for m in at.markdown)
    assert t("beyond.row_fi_who", lang) in text and "[num_blocks, block_size, num_kv_heads, head_dim]" in text
    assert "indptr = [0, 3, 5, 9]" in text and "indices = [7, 2, 9, 4, 1, 8, 5, 3, 6]" in text
    assert "last_page_len = [2, 2, 3]" in text
    table = at.dataframe[-1].value
    assert list(table[t("beyond.col_kernel", lang)]) == list(EXTERNAL_RUNGS)
    assert set(table[t("beyond.col_status", lang)]) == {t("beyond.skip_no_cuda", lang, device="cpu")}
