"""A picked local checkpoint (tests/paged/hf_tiny.py, allow-listed) on the pages beyond the engine table: the bug lab
runs its fault against the fault-free twin on that model and shows the drift in its token pieces, offers only the
"continue" task (no ⟨SEP⟩) and names a `?task=recall` link in the URL-notes box; the pool figures of pages 4 and 6
name each written cell's token in the hover, checked against transformers' own decode of that token id."""

from __future__ import annotations

import html
import json

import pytest

from paged.faults import Fault
from ui.safe_text import shown_html, unescaped
from ui.strings import t
from viz.pool import read_pool

from .app_util import app_test, no_exception, url_warning

BUGLAB, ENGINE, SHARING = "app_pages/5_Bug_lab.py", "app_pages/4_Engine.py", "app_pages/6_Sharing.py"
transformers = pytest.importorskip("transformers")


def shown_piece(hf, token_id: int) -> str | None:
    """How a cell must show one token, from transformers alone: its decode with ␣ / ↵ for space / newline; None
    when that is not plain printable text of at most 10 characters, or a special token (not checked)."""
    text = hf.decode([token_id])
    if token_id in hf.all_special_ids or "\ufffd" in text or not all(c.isprintable() or c in " \n" for c in text):
        return None
    shown = text.replace(" ", "␣").replace("\n", "↵")
    return shown if 0 < len(shown) <= 10 else None


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_bug_lab_runs_a_fault_on_the_picked_model_in_its_own_pieces(allowed):
    """From the shipped model (recall, the default) the picker switches to the checkpoint: only "continue" is left
    (with the note why), the slot off-by-one drifts from the fault-free twin, and the marked first wrong token is
    that model's piece (transformers' decode of the faulty id); switched off, nothing drifts."""
    at = app_test(BUGLAB, params={"fault": "slot_off_by_one"}).run()
    no_exception(at)
    assert at.radio(key="buglab.task").options == [t("buglab.task_recall", "en"), t("buglab.task_continue", "en")]
    at.selectbox(key="buglab.model").set_value(allowed.name).run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert at.radio(key="buglab.task").options == [t("buglab.task_continue", "en")]
    assert any(t("buglab.recall_needs_sep", "en")[:40] in c.value for c in at.sidebar.caption)
    assert at.query_params["model"] == allowed.name and at.query_params["task"] == "continue"
    assert t("buglab.model_header_picked", "en", name=allowed.name) in [unescaped(s.value) for s in at.subheader]
    runs = at.session_state["buglab.model_runs"]
    run = next(r for (choice, fault, _), r in runs.items() if choice == allowed.name and fault is Fault.SLOT_OFF_BY_ONE)
    hf = transformers.AutoTokenizer.from_pretrained(allowed)
    boxes = [m.value for m in at.markdown if "bl-marker" in m.value]
    drifts = [d for d in at.session_state["buglab.drifts"] if d.first_divergence is not None]
    assert drifts and boxes
    checked = 0
    for d in drifts:
        paged = next(p for p in run.paged if p.request_id == d.request_id)
        prompt = shown_html(hf.decode(paged.prompt_token_ids, skip_special_tokens=True))  # as the page escapes it
        box = next(b for b in boxes if prompt in b)  # the request's box shows its prompt in the model's text
        expected = shown_piece(hf, paged.token_ids[d.first_divergence])
        if expected is not None:
            assert f"▶{shown_html(expected)}</mark>" in box
            checked += 1
    assert checked
    at.toggle(key="buglab.off_widget").set_value(True).run()
    no_exception(at)
    assert not [d for d in at.session_state["buglab.drifts"] if d.first_divergence is not None]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_recall_link_with_a_model_without_sep_falls_back_to_continue(allowed, lang):
    at = app_test(BUGLAB, lang, params={"model": str(allowed), "task": "recall"}).run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert t("common.url_title", lang) in url_warning(at) and "`task`" in url_warning(at)
    assert at.radio(key="buglab.task").value == "continue" and at.query_params["task"] == "continue"
    assert any(t("buglab.recall_needs_sep", lang)[:20] in c.value for c in at.sidebar.caption)


def test_pool_hover_names_each_written_token_in_the_models_pieces(allowed):
    """Page 4 on the checkpoint, two steps: every written cell's hover ends with "· token '…'", the piece of the
    token at that index (prompt ids from transformers' tokenizer, then the generated ids), per transformers' decode."""
    at = app_test(ENGINE, params={"model": str(allowed)}).run()
    for _ in range(2):
        at.button(key="engine.step").click().run()
    no_exception(at)
    demo = at.session_state["engine.lesson"]
    hf = transformers.AutoTokenizer.from_pretrained(allowed)
    spec_of = dict(zip(demo.request_ids, demo.requests))
    ids = {chr(ord("A") + sid): hf(spec_of[s.request_id].prompt).input_ids + list(s.generated_token_ids)
           for sid, s in demo.view.seqs.items()}
    pool = next(h.proto.body for h in at.get("html") if 'class="paged-pool"' in h.proto.body)  # viz.pool.pool_html
    checked = 0
    for cell in read_pool(pool):
        hover = cell["title"]  # the tooltip as a learner reads it (entities decoded)
        if " token " not in hover or "→" not in hover:
            continue
        label, _, index = hover.split(" → ")[0].split(" ")
        assert "· token '" in hover, hover
        expected = shown_piece(hf, ids[label][int(index)])
        if expected is not None:
            assert hover.endswith(f"· token '{expected}'"), hover
            checked += 1
    assert checked >= 10


def test_sharing_pool_hover_lists_each_blocks_tokens(allowed):
    """Page 6 on the checkpoint after one step: a held block's hover lists its tokens; the first block of A's table
    lists A's first prompt tokens as transformers decodes them."""
    at = app_test(SHARING, params={"model": str(allowed)}).run()
    at.button(key="sharing.step").click().run()
    no_exception(at)
    demo = at.session_state["sharing.lesson"]
    hf = transformers.AutoTokenizer.from_pretrained(allowed)
    sid, seq = min(demo.view.seqs.items())
    prompt = hf(dict(zip(demo.request_ids, demo.requests))[seq.request_id].prompt).input_ids
    block = seq.block_table[0]
    blocks = next(c for c in charts(at) if any(tr.get("name") == "copy-on-write" for tr in c["data"]))
    hover = next(tr for tr in blocks["data"] if tr.get("name") == "blocks")["hovertext"][block]
    size = demo.view.block_size
    pieces = [shown_piece(hf, i) for i in prompt[:size]]
    assert "· tokens '" in hover
    assert all(f"'{html.escape(p, quote=False)}'" in hover for p in pieces if p is not None) and any(pieces)


def test_a_checkpoint_that_cannot_load_is_an_error_box_and_the_tensor_half_still_runs(monkeypatch, tmp_path):
    """An allowed directory whose config.json is not a model: the bug lab names it and the loader's reason with the
    fix, no traceback; the random-tensor half (its two charts) does not need the model and still runs."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    monkeypatch.setenv("PAGED_MODEL_DIRS", str(broken))
    monkeypatch.delenv("PAGED_MODEL_DIR", raising=False)
    at = app_test(BUGLAB, params={"model": str(broken.resolve())}).run()
    no_exception(at)
    assert at.error and t("model.fix_load", "en")[:30] in at.error[0].value
    assert t("model.err_load", "en", name="broken", detail="")[:25] in at.error[0].value
    assert len(at.get("plotly_chart")) == 2


def test_the_bug_lab_export_names_the_model(allowed, monkeypatch):
    """The downloaded trace says which model ran (the allowed directory, or "shipped")."""
    import ui

    made = {}
    monkeypatch.setattr(ui, "export_button", lambda ctx, trace, name, **kw: made.update(trace=trace, name=name))
    at = app_test(BUGLAB, params={"model": str(allowed), "fault": "use_after_free"}).run()
    no_exception(at)
    out = made["trace"]()
    assert out["model"] == allowed.name and out["fault"] == "use_after_free" and out["drift"]
