"""The model picker of pages 4 and 6 through AppTest, on a tiny random Llama checkpoint (tests/paged/hf_tiny.py)
in an operator's allow-list (PAGED_MODEL_DIRS): listed beside the shipped model, selecting it runs the engine on its
own tokenizer (cells show its tokens' text, the output is its decode), a link's `?model=` outside the list is
refused in the URL-notes box, PAGED_MODEL_DIR makes it the default, and a KV pool that cannot fit is an error box
naming the numbers, in both languages."""

from __future__ import annotations

import pytest

from paged.model.tokenizer import ByteTokenizer, HFTokenizer
from ui.safe_text import unescaped
from ui.strings import t

from .app_util import app_test, no_exception, url_warning

ENGINE, SHARING = "app_pages/4_Engine.py", "app_pages/6_Sharing.py"
transformers = pytest.importorskip("transformers")


def _expected_label(token: str) -> str | None:
    """A byte-level BPE token string as the cells must show it, from transformers' own byte table: printable text
    with ␣ / ↵ for space / newline, one invalid or control byte as ⟨0xNN⟩; None for anything else (not checked)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    to_byte = {ch: b for b, ch in bytes_to_unicode().items()}
    data = bytes(to_byte[ch] for ch in token)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(ch.isprintable() or ch in " \n" for ch in text):
        shown = text.replace(" ", "␣").replace("\n", "↵")
    elif len(data) == 1:
        shown = f"⟨0x{data[0]:02X}⟩"
    else:
        return None
    return shown if len(shown) <= 10 else shown[:9] + "…"


def test_picker_lists_the_allowed_checkpoint_and_runs_it_with_its_own_tokens(allowed):
    """The picker offers the shipped model (default) and the allowed directory; picking it replays the requests on
    that model: prompts are encoded by its tokenizer (transformers' ids), the "this step's token" cells hold each
    token's own text (transformers' token string, Ġ shown as ␣) and the output column is transformers' decode."""
    at = app_test(ENGINE).run()
    no_exception(at)
    picker = at.selectbox(key="engine.model")
    assert picker.options == [t("model.shipped", "en"), allowed.name] and picker.value == "shipped"
    assert isinstance(at.session_state["engine.lesson"].tokenizer, ByteTokenizer)
    picker.set_value(allowed.name).run()
    at.button(key="engine.step").click().run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert at.query_params["model"] == allowed.name  # the folder's name, never its server path
    demo = at.session_state["engine.lesson"]
    assert isinstance(demo.tokenizer, HFTokenizer) and demo.last.paged.phase == "prefill"
    hf = transformers.AutoTokenizer.from_pretrained(allowed)
    for spec, fed in zip(demo.all_specs(), demo.last.paged.seqs):
        assert fed.tokens_in == hf(spec.prompt).input_ids
    at.button(key="engine.step").click().run()
    no_exception(at)
    # the text table (folded with the reference since issue 38), found by its column
    (table,) = [tb.value for tb in at.table if t("engine.col_newest", "en") in tb.value.columns]
    newest = [unescaped(c) for c in table[t("engine.col_newest", "en")]]  # cells are markdown: escaped text
    outputs = [unescaped(c) for c in table[t("engine.col_output", "en")]]
    seqs, checked = at.session_state["engine.lesson"].view.seqs, 0
    for (sid, seq), cell, output in zip(sorted(seqs.items()), newest, outputs):
        expected = _expected_label(hf.convert_ids_to_tokens(seq.generated_token_ids[-1]))
        if expected is not None and seq.generated_token_ids[-1] not in hf.all_special_ids:
            assert cell == expected
            checked += 1
        text = hf.decode(seq.generated_token_ids, skip_special_tokens=True)
        # plain text only: the page names what decode drops or hides (an id past the vocabulary as ⟨#id⟩, a
        # control character or a split character's byte as ⟨0xNN⟩)
        if all(i < len(hf) for i in seq.generated_token_ids) and "\ufffd" not in text and \
                all(c.isprintable() or c in "\n\t" for c in text):
            assert output == text
    assert checked
    assert any(t("model.plain_text", "en")[:40] in c.value for c in at.caption)


def test_sharing_page_has_the_picker_too(allowed):
    """Page 6 has the picker; a link made when links held the folder's full path still opens that folder, and the
    URL is rewritten to its name."""
    at = app_test(SHARING, "zh", params={"model": str(allowed)}).run()
    no_exception(at)
    assert at.selectbox(key="sharing.model").value == allowed.name
    assert at.query_params["model"] == allowed.name
    assert isinstance(at.session_state["sharing.lesson"].tokenizer, HFTokenizer)
    assert not at.error and "model" not in url_warning(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_link_naming_a_directory_outside_the_list_is_refused(checkpoint, monkeypatch, lang):
    """Without an allow-list even a real checkpoint directory is refused by a link (no picker is shown); with one,
    any other path is refused too. The URL-notes box names `model` in the page's language; the shipped model runs."""
    monkeypatch.delenv("PAGED_MODEL_DIRS", raising=False)
    monkeypatch.delenv("PAGED_MODEL_DIR", raising=False)
    for params, picker in (({"model": str(checkpoint)}, False), ({"model": "/etc"}, True)):
        at = app_test(ENGINE, lang, params=params).run()
        no_exception(at)
        assert t("common.url_title", lang) in url_warning(at) and "`model`" in url_warning(at)
        assert any(s.key == "engine.model" for s in at.selectbox) == picker
        assert isinstance(at.session_state["engine.lesson"].tokenizer, ByteTokenizer)
        assert at.query_params.get("model", "shipped") == "shipped"
        monkeypatch.setenv("PAGED_MODEL_DIRS", str(checkpoint))


def test_paged_model_dir_is_the_default_and_a_bad_one_is_named(checkpoint, monkeypatch, tmp_path):
    monkeypatch.delenv("PAGED_MODEL_DIRS", raising=False)
    monkeypatch.setenv("PAGED_MODEL_DIR", str(checkpoint))
    at = app_test(ENGINE).run()
    no_exception(at)
    assert at.selectbox(key="engine.model").value == checkpoint.name
    assert isinstance(at.session_state["engine.lesson"].tokenizer, HFTokenizer)
    monkeypatch.setenv("PAGED_MODEL_DIR", str(tmp_path / "missing"))
    at = app_test(ENGINE, "zh").run()
    no_exception(at)
    assert any(t("model.err_default", "zh", path="missing") in e.value for e in at.error)
    assert not any(str(tmp_path) in e.value for e in at.error), "the server's path is shown"
    assert isinstance(at.session_state["engine.lesson"].tokenizer, ByteTokenizer)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_kv_pool_larger_than_free_memory_is_an_error_box_with_the_numbers(allowed, monkeypatch, lang):
    """With 1 MB free the default pool of the checkpoint (2 x 2 layers x 32 blocks x 8 x 2 kv heads x 16 x 4 bytes
    = 65,536 bytes) fits; num_blocks 64 from a link needs 131,072 > 100,000 bytes: an error box with those numbers,
    no traceback."""
    from paged.engine import admission

    monkeypatch.setattr(admission, "free_memory_bytes", lambda device: 100_000)
    at = app_test(ENGINE, lang, params={"model": str(allowed), "num_blocks": 64}).run()
    no_exception(at)
    need = 2 * 2 * 64 * 8 * 2 * 16 * 4
    boxes = unescaped(" ".join(e.value for e in at.error))
    assert t("model.err_engine", lang, message="")[:6] in boxes
    for number in (f"{need:,} bytes", "64 blocks", "block_size 8", "2 kv heads", "head_dim 16", "100,000 bytes"):
        assert number in boxes


def test_choices_come_only_from_the_operators_lists(checkpoint, tmp_path):
    """PAGED_MODEL_DIRS (environment) and the secrets' list, each kept only if it is a directory with config.json;
    PAGED_MODEL_DIR is allowed and the default; an unusable PAGED_MODEL_DIR is reported, the shipped model used."""
    from ui.model_picker import SHIPPED, model_choices

    other, empty = tmp_path / "other", tmp_path / "empty"
    other.mkdir(), empty.mkdir()
    (other / "config.json").write_text("{}")
    assert model_choices({"PAGED_MODEL_DIRS": str(empty)}, secrets=[str(checkpoint), str(other)]) == (
        {checkpoint.name: checkpoint, "other": other.resolve()}, SHIPPED, None)
    assert model_choices({"PAGED_MODEL_DIR": str(checkpoint)}, secrets=[]) == (
        {checkpoint.name: checkpoint}, checkpoint.name, None)
    assert model_choices({"PAGED_MODEL_DIR": str(empty)}, secrets=[]) == ({}, SHIPPED, "empty")


def test_the_allow_list_can_live_in_streamlit_secrets(checkpoint, monkeypatch):
    monkeypatch.delenv("PAGED_MODEL_DIRS", raising=False)
    monkeypatch.delenv("PAGED_MODEL_DIR", raising=False)
    at = app_test(ENGINE)
    at.secrets["PAGED_MODEL_DIRS"] = [str(checkpoint)]
    at.run()
    no_exception(at)
    assert at.selectbox(key="engine.model").options[1] == checkpoint.name
