"""Page 12 · Speculative decoding through AppTest: steps and Back, the break-it's drift box, the quiz, both
languages."""

from __future__ import annotations

from lessons.spec import SpecConfig, SpecLesson
from paged.model import load_model
from ui.strings import t

from .app_util import app_test, no_exception

PAGE = "app_pages/12_Speculative_decoding.py"


def test_step_and_back_land_where_a_replay_lands():
    """Three steps then Back show the state of a fresh two-step replay; the link holds the step; no error."""
    at = app_test(PAGE, params={"block_size": 2}).run()
    for _ in range(3):
        at.button(key="spec.step").click().run()
    at.button(key="spec.back").click().run()
    no_exception(at)
    assert not at.error and at.query_params["steps"] == "2"
    replay = SpecLesson.replay(SpecConfig(block_size=2), 2, *load_model())
    assert at.session_state["spec.lesson"].rows() == replay.rows() != []
    assert any(m.label == t("spec.metric_per_pass", "en") for m in at.metric)


def test_the_break_link_shows_the_drift_in_chinese():
    """?forget=1&steps=14 in 简体中文: the paged output has left its twin, the red box names the token; no
    exception."""
    at = app_test(PAGE, "zh", {"forget": 1, "steps": 14}).run()
    no_exception(at)
    assert [e for e in at.error if e.icon == ":material/bug_report:"]
    assert t("spec.twins_bad", "zh", index=12) in [e.value for e in at.error]


def test_the_quiz_hides_the_answer_until_revealed():
    """?quiz=1: a question about the step shown; while it is open the new cached_token_count reads "?"."""
    at = app_test(PAGE, params={"quiz": 1, "steps": 3, "scenario": "copies"}).run()
    no_exception(at)
    assert at.session_state["quiz.spec"]["question"] is not None
    assert any("→ ?" in s.value for s in at.success)


def test_a_stale_count_is_flagged_on_the_row_and_in_the_box_before_the_outputs_drift():
    """Issue 38.4: ?forget=1&steps=11: the outputs still agree, yet the box no longer says "step on until a guess
    is rejected": it names the first stale step; every row whose cached_token_count passed its twin's (A finishing
    87 -> 92 with two rejected guesses kept) is a warning naming how far ahead it is."""
    at = app_test(PAGE, "en", {"forget": 1, "steps": 11}).run()
    no_exception(at)
    lesson = at.session_state["spec.lesson"]
    assert lesson.first_divergence() is None
    assert t("spec.twins_wait", "en") not in [i.value for i in at.info]
    step, seq, ahead = lesson.first_stale()
    assert any(f"step {step}" in w.value and f"{ahead} ahead" in w.value for w in at.warning)
    stale = [r for r in lesson.rows() if r.twin_cached_after is not None and r.cached_after > r.twin_cached_after]
    assert any(r.seq_id == 0 for r in stale)
    for r in stale:
        want = t("spec.row_bug", "en", ahead=r.cached_after - r.twin_cached_after)
        assert any(want in w.value and w.value.startswith(f"{'AB'[r.seq_id]}:") for w in at.warning)
