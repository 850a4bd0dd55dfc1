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
