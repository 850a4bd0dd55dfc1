"""Page 11 · Sliding window through AppTest: stepping shows the holes at the front of A's table and the blocks held
staying flat; the break-it's drift is named by the contiguous twin; the quiz asks which blocks the next step frees."""

from __future__ import annotations

import pytest

from .app_util import app_test, no_exception

PAGE = "app_pages/11_Sliding_window.py"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_steps_free_blocks_behind_the_window_and_the_break_drifts(lang):
    """Four steps: A's table has holes at the front and holds fewer blocks than full attention; the twins agree;
    the quiz's answer is what the next step frees. Switching the break on keeps the step and shows the drift
    error (paged != contiguous twin)."""
    at = app_test(PAGE, lang, {"quiz": 1}).run()
    no_exception(at)
    assert at.session_state["quiz.window"]["question"] is None  # the next step is a prefill: nothing to ask
    for _ in range(4):
        at.button(key="window.step_btn").click().run()
    no_exception(at)
    assert at.query_params["step"] == "4"
    run = at.session_state["window.runs"]
    (only,) = run.values()
    frame = only.frames[4]
    assert frame.table[:2] == [-1, -1] and frame.held < frame.held_full
    assert not at.error
    question = at.session_state["quiz.window"]["question"]
    at.button(key="window.step_btn").click().run()  # the answer is what the next step then does
    assert question.answer == (", ".join(map(str, only.frames[5].freed)) or "—")
    at.button(key="window.back").click().run()
    at.toggle(key="window.free_early").set_value(True).run()
    no_exception(at)
    assert at.query_params["step"] == "4" and len(at.error) == 1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_neighbours_step_names_the_blocks_it_wrote_in_both_languages(lang):
    """Issue 38.1: W 2, block_size 1, step 2: the box names every block B's prefill wrote (its table's live block
    plus what its own window released at once) and how many of them A's window freed; never more than it names."""
    at = app_test(PAGE, lang, {"window": 2, "block_size": 1, "step": 2}).run()
    no_exception(at)
    (run,) = at.session_state["window.runs"].values()
    frame = run.frames[2]
    live = [b for b in frame.tables[1] if b >= 0]
    wrote = sorted(set(live) | set(frame.neighbour_freed))
    from_a = sorted(set(wrote) & set(run.frames[1].freed))
    said = " ".join(i.value for i in at.info)
    blocks = said.split("[")[1].split("]")[0]
    assert sorted(int(b) for b in blocks.split(", ")) == wrote and len(from_a) <= len(wrote)
    assert f" {len(from_a)} " in said and str(live) in said
