"""Break it where it is taught, through AppTest in both languages: page 2's "remove the causal mask" and
"context_len off by one" (knobs in the URL), page 3's "write the next token to the wrong slot" (the op log in the
URL replays the damage)."""

from __future__ import annotations

import pytest

from ui.strings import t

from .app_util import app_test, no_exception

GATHER, BATCH = "app_pages/2_Gather_and_attend.py", "app_pages/3_Batch_decode.py"


def in_order(at) -> list:
    """Every element of the page's main area, in the order it is drawn."""
    out, todo = [], list(at.main.children.values())
    while todo:
        node = todo.pop(0)
        out.append(node)
        todo[:0] = list(getattr(node, "children", {}).values())
    return out


def notes(at) -> list[str]:
    return [i.value for i in at.info]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_break_says_what_broke_next_to_its_switch(lang):
    """Prefill, 8 tokens, mask removed, gather complete: the first box after the playback bar (above every figure)
    is an error naming the break and how many rows differ (7 of 8) with the relative error; the check says
    "differs" for the broken run; the note that every weight above the diagonal is 0 is gone, the weights drawn are
    the unmasked ones (nonzero above the diagonal), and the mask drawn is the one that ran (all visible)."""
    at = app_test(GATHER, lang, {"mode": "prefill", "context_len": 8, "no_mask": 1, "step": 8}).run()
    no_exception(at)
    br = at.session_state["gather.mask_break"]
    top = t("breaks.top_mask", lang, changed=7, rows=8, rel=f"{br.rel_err:.2e}", tol="1e-05", dtype="float32",
            worst=f"{br.max_abs_err:.2e}", told=8, context_len=8)
    kinds = [(e.type, e.value if e.type == "error" else None) for e in in_order(at)]
    assert ("error", top) in kinds
    assert kinds.index(("error", top)) < [k for k, _ in kinds].index("plotly_chart")
    assert [m.value for m in at.metric if m.label == t("gather.verdict", lang)] == [t("common.not_ok", lang)]
    assert not any(t("gather.prefill_notice", lang) in n for n in notes(at))
    assert any(t("gather.prefill_notice_off", lang) in n for n in notes(at))
    future = br.weights[0].triu(1)  # head 0: weights above the diagonal, drawn on the page
    assert future.abs().max() > 0.01 and br.weights.shape == (4, 8, 8)
    assert any(t("gather.mask_title_off", lang) in m.value for m in at.markdown)


def test_context_len_plus_one_draws_the_broken_decode():
    """Decode told context_len 10 over a cache of 9: the weights figure is over the 10 tokens it read, the check's
    verdict "differs", the correct run's bit-for-bit note is not shown."""
    at = app_test(GATHER, "en", {"context_len": 9, "ctx_off": 1, "step": 9}).run()
    no_exception(at)
    assert any(t("gather.weights_title_told", "en", told=10) in m.value for m in at.markdown)
    assert [m.value for m in at.metric if m.label == t("gather.verdict", "en")] == [t("common.not_ok", "en")]
    assert not any("bit-for-bit" in n for n in notes(at))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_mask_changes_all_prefill_rows_but_the_last(lang):
    at = app_test(GATHER, lang, {"mode": "prefill", "context_len": 8, "no_mask": 1}).run()
    assert at.toggle(key="gather.no_mask").value
    wait = t("breaks.wait", lang, what=t("breaks.what_mask", lang), all=t("gather.all", lang))
    assert any(i.value == wait for i in at.info)
    at.button(key="gather.all").click().run()
    no_exception(at)
    br = at.session_state["gather.mask_break"]
    assert br.changed == [True] * 7 + [False]
    assert any(t("breaks.mask_header", lang) == s.value for s in at.subheader)
    assert at.query_params["no_mask"] == "1"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_mask_in_decode_changes_nothing_and_says_why(lang):
    at = app_test(GATHER, lang, {"context_len": 6}).run()
    at.toggle(key="gather.no_mask").set_value(True).run()
    at.button(key="gather.all").click().run()
    no_exception(at)
    br = at.session_state["gather.mask_break"]
    assert br.changed == [False]
    why = t("breaks.mask_decode", lang, worst=f"{max(br.row_diff):.2e}", last=5)
    assert any(why in i.value for i in at.info)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_context_len_minus_one_drops_the_newest_token(lang):
    """The select sets ctx_off in the URL; −1 drops token context_len − 1 and the check fails."""
    at = app_test(GATHER, lang, {"context_len": 9}).run()
    at.selectbox(key="gather.ctx_off").set_value(-1).run()
    assert at.query_params["ctx_off"] == "-1"
    at.button(key="gather.all").click().run()
    no_exception(at)
    br = at.session_state["gather.len_break"]
    assert br.context_len == 8 and br.dropped_token == 8 and not br.ok
    assert any(m.value == t("common.not_ok", lang) for m in at.metric)


def test_context_len_plus_one_from_the_url_reads_an_unwritten_slot():
    at = app_test(GATHER, "en", {"context_len": 9, "ctx_off": 1, "step": 9}).run()
    no_exception(at)
    br = at.session_state["gather.len_break"]
    assert br.context_len == 10 and br.holds_token is None and not br.past_table and not br.ok


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_wrong_slot_corrupts_the_neighbour_and_the_link_replays_it(lang):
    """Seed batch, switch on, sequence C: C's token 15 belongs in slot 27 (block 6, offset 3); the stray write
    lands in slot 28, block 7 offset 0 = A's token 0. The page names A, the checks of A and C fail, the switch is
    off again, and the link (ops=w2) rebuilds the same damage."""
    at = app_test(BATCH, lang).run()
    at.toggle(key="batch.wrong").set_value(True).run()
    at.selectbox(key="batch.wrong_seq").set_value(2).run()
    at.button(key="batch.decode").click().run()
    no_exception(at)
    demo = at.session_state["batch.lesson"]
    m = demo.last_event.misplaced
    assert demo.ops == ["w2"] and (m.slot, m.written, m.victim, m.victim_token, m.overwrote) == (27, 28, 0, 0, True)
    assert {c.seq_id for c in demo.checks if not c.ok} == {0, 2}
    text = t("breaks.wrong_overwrote", lang, written=28, victim="A", victim_token=0, seq="C", slot=27)
    assert any(text in e.value for e in at.error)
    assert not at.toggle(key="batch.wrong").value and at.query_params["ops"] == "w2"
    at.button(key="batch.decode").click().run()
    assert at.session_state["batch.lesson"].ops == ["w2", "d"]
    again = app_test(BATCH, lang, {"ops": "w2,d"}).run()
    no_exception(again)
    assert {c.seq_id for c in again.session_state["batch.lesson"].checks if not c.ok} == {0, 2}


def test_wrong_slot_stays_armed_until_a_decode_or_a_reset():
    """The switch survives actions that do not decode (Add); a Reset replaces the armed demo: the switch goes off
    and the next decode is a plain one."""
    at = app_test(BATCH, "en").run()
    at.toggle(key="batch.wrong").set_value(True).run()
    at.button(key="batch.add").click().run()
    assert at.toggle(key="batch.wrong").value and at.session_state["batch.lesson"].armed == 0
    at.button(key="batch.reset").click().run()
    no_exception(at)
    assert not at.toggle(key="batch.wrong").value
    at.button(key="batch.decode").click().run()
    assert at.session_state["batch.lesson"].ops == ["d"] and at.session_state["batch.lesson"].last_event.misplaced is None
