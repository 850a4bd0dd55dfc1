"""Each figure's text alternative on a real page (AppTest): the visually hidden sentence under the pool figure says
what the page's own state holds, counted here from that state (the table the learner typed), in both languages."""

from __future__ import annotations

import html
import re

import pytest

from ui.strings import t

from .app_util import app_test

ADDRESS = "app_pages/1_Address_translation.py"
SR_ONLY = re.compile(r"<div class='paged-sr-only'>(.*?)</div>")


def _words(at, lang: str = "en") -> list[str]:
    """The text alternatives on the page (ui.widgets' .paged-sr-only blocks), without their leading label."""
    label = t("a11y.label", lang)
    found = [html.unescape(w) for m in at.markdown for w in SR_ONLY.findall(m.value)]
    assert all(w.startswith(label + " ") for w in found), found
    return [w[len(label) + 1:] for w in found]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pool_words_count_the_typed_table(lang):
    """Table "6, 1, 6, 3" on a pool of 10 blocks: 3 distinct blocks held, so 7 free; A's blocks in table order."""
    table, num_blocks = [6, 1, 6, 3], 10
    at = app_test(ADDRESS, lang, {"table": ", ".join(map(str, table)), "num_blocks": num_blocks}).run()
    assert not at.exception, [e.value for e in at.exception]
    free = num_blocks - len(set(table))
    words = [w for w in _words(at, lang) if "pool" in w]
    assert len(words) == 1, _words(at, lang)
    if lang == "en":
        assert words[0] == f"pool: {free} of {num_blocks} blocks free; A holds 6, 1, 6, 3"
    else:
        assert words[0] == f"pool：{num_blocks} 个 block 中 {free} 个空闲；A 占用 6, 1, 6, 3"
    chain = [w for w in _words(at, lang) if "pool" not in w]
    assert len(chain) == 1 and "block_table" in chain[0] and "slot" in chain[0]
