"""Predict, then reveal (`?quiz=1`) through AppTest on pages 1, 3 and 4, in both languages: the box appears only
when asked for, a reveal scores once, the step then does what the answer said, and a new state asks anew."""

from __future__ import annotations

import pytest

from ui.strings import t

from .app_util import app_test, no_exception

ADDRESS, BATCH, ENGINE = "app_pages/1_Address_translation.py", "app_pages/3_Batch_decode.py", "app_pages/4_Engine.py"


def answer(at, page: str, right: bool):
    """Pick the right (or a wrong) choice of the page's question and press Reveal; returns the question."""
    held = at.session_state[f"quiz.{page}"]
    q = held["question"]
    pick = q.answer if right else next(c for c in q.choices if c != q.answer)
    at.radio(key=f"quiz.{page}.choice.{held['n']}").set_value(pick).run()
    at.button(key=f"quiz.{page}.reveal").click().run()
    no_exception(at)
    return q


def answer_then_step(at, page: str, step_button: str, right: bool, rounds: int = 3):
    """`rounds` times: answer the page's question (rightly or not), then press the step it asks about; yields each
    question once its step has run."""
    for _ in range(rounds):
        q = answer(at, page, right=right)
        at.button(key=step_button).click().run()
        no_exception(at)
        yield q


@pytest.mark.parametrize("path", [ADDRESS, BATCH, ENGINE])
def test_no_quiz_unless_the_link_asks(path):
    at = app_test(path).run()
    no_exception(at)
    assert not any(m.value.endswith(f"**{t('quiz.header', 'en')}**") for m in at.markdown)
    assert "quiz" not in at.query_params


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_address_quiz_scores_and_asks_again(lang):
    at = app_test(ADDRESS, lang, {"quiz": 1}).run()
    no_exception(at)
    assert at.query_params["quiz"] == "1"
    q = answer(at, "address", right=True)
    assert any(t("quiz.right", lang, answer=q.answer) in s.value for s in at.success)
    assert at.session_state["quiz.score"] == {"right": 1, "asked": 1}
    at.button(key="quiz.address.another_btn").click().run()
    q2 = answer(at, "address", right=False)
    assert at.session_state["quiz.score"] == {"right": 1, "asked": 2} and at.error
    assert any(t("quiz.score", lang, right=1, asked=2) == c.value for c in at.caption)
    assert q2 is at.session_state["quiz.address"]["question"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_batch_quiz_answer_is_what_the_decode_does(lang):
    at = app_test(BATCH, lang, {"quiz": 1}).run()
    for q in answer_then_step(at, "batch", "batch.decode", right=True):
        assert tuple(sorted(at.session_state["batch.lesson"].last_event.new_blocks)) == q.answer
    assert at.session_state["quiz.score"] == {"right": 3, "asked": 3}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_engine_quiz_answer_is_the_cached_count_after_the_step(lang):
    at = app_test(ENGINE, lang, {"quiz": 1}).run()
    for q in answer_then_step(at, "engine", "engine.step", right=False):
        assert at.session_state["engine.lesson"].view.seqs[q.prompt[1]["seq"]].cached_token_count == q.answer
    assert at.session_state["quiz.score"] == {"right": 0, "asked": 3}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_open_address_question_hides_its_answer(lang):
    """Page 1 with the quiz on and the token slider set to the very token asked about: while the question is open
    no table of slots is drawn, no pool cell names a token (hover: only a slot's own address), no cell is outlined
    and no metric shows the chain; after Reveal the table, the pool's labels and the chain are back."""
    at = app_test(ADDRESS, lang, {"quiz": 1}).run()
    token = at.session_state["quiz.address"]["question"].prompt[1]["token"]
    at.slider(key="address.token").set_value(token).run()
    no_exception(at)
    assert at.session_state["quiz.address"]["revealed"] is None  # the same question is still open
    assert not at.dataframe and not at.metric
    traces = pool_traces(at)
    assert traces["highlight"]["x"] == [] and traces["A"]["text"] and set(traces["A"]["text"]) == {""}
    assert not any("→" in h for h in traces["A"]["hovertext"])  # no token's chain in a hover
    answer(at, "address", right=True)
    assert at.dataframe and len(at.metric) == 5
    traces = pool_traces(at)
    assert len(traces["highlight"]["x"]) == 1 and f"A{token}" in traces["A"]["text"]


def pool_traces(at) -> dict:
    """Page 1's pool figure as drawn: its traces by name."""
    import json

    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"block ids"' in c.proto.spec]
    return {tr["name"]: tr for tr in spec["data"]}
