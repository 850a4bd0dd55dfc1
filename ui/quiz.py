"""Predict, then reveal: the shared quiz box of pages 1, 3 and 4 (`?quiz=1`). The questions come from lessons.quiz.

    quiz_on = ui.quiz.enabled(knobs)                     # right after Knobs(...): the flag lives in the URL
    ui.quiz.show(ctx, "batch", state_id, lambda seed: batch_question(demo, seed))

A question is made once per page state (`state_id`) and kept until the state changes or "Another question" is
pressed; the score is the session's, across pages.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

from lessons.quiz import Question
from viz.colors import seq_label

from .engine_actions import explain_step, why_sep
from .parsers import one_of

SCORE = "quiz.score"  # {"right": int, "asked": int}, for the whole session


def enabled(knobs) -> bool:
    """Whether `?quiz=1` asked for the quiz on this page; off keeps the page's links free of it."""
    on = bool(knobs.state("quiz", 0, one_of([0, 1])))
    if not on:
        knobs.values.pop("quiz", None)
    return on


def _label(value) -> str:
    return ", ".join(map(seq_label, value)) if isinstance(value, (list, tuple)) else seq_label(value)


def piece_text(ctx, piece) -> str:
    """One (key, values) piece of a question in the page's language; "seq"/"seqs" values become labels, a
    "status" (a sequence's, e.g. "running") the engine page's word for it."""
    key, values = piece
    values = dict(values)
    for name in ("seq", "seqs"):
        if name in values:
            values[name] = _label(values[name]) or "—"
    if "status" in values:
        values["status"] = ctx.t(f"engine.status_{values['status']}")
    if "why" in values:  # the scheduler's own (code, values) pieces
        values["why"] = explain_step(ctx, values["why"])
    return ctx.t(f"quiz.{key}", **values)


def open_question(page: str) -> Question | None:
    """The page's question while it is open (asked, not yet revealed): what the page must not show meanwhile."""
    held = st.session_state.get(f"quiz.{page}")
    return held["question"] if held and held["revealed"] is None else None


def choice_text(ctx, question: Question, choice) -> str:
    if question.kind == "new_block":
        return _label(choice) if choice else ctx.t("quiz.none_choice")
    return str(choice)


def show(ctx, page: str, state_id, make: Callable[[int], Question | None], none_key: str = "",
         watch: bool = True) -> Question | None:
    """The quiz box: the question for this state, a choice, Reveal, the answer with its why, the score.
    `make(seed)` builds the question (None: nothing to ask now, `none_key` says why). Returns the question."""
    key = f"quiz.{page}"
    held = st.session_state.get(key)
    if held is None or held["state"] != state_id or st.session_state.pop(f"{key}.another", False):
        n = st.session_state.get(f"{key}.n", 0) + 1
        st.session_state[f"{key}.n"] = n
        held = {"state": state_id, "n": n, "question": make(n), "revealed": None}
        st.session_state[key] = held
    question, n = held["question"], held["n"]
    score = st.session_state.setdefault(SCORE, {"right": 0, "asked": 0})
    with st.container(border=True):
        st.markdown(f":material/quiz: **{ctx.t('quiz.header')}**")
        if question is None:
            st.caption(ctx.t(none_key) if none_key else "—")
            return None
        st.markdown(piece_text(ctx, question.prompt))
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        guess = c1.radio(ctx.t("quiz.your_guess"), list(question.choices), index=None, horizontal=True,
                         format_func=lambda c: choice_text(ctx, question, c), key=f"{key}.choice.{n}",
                         disabled=held["revealed"] is not None)
        if c2.button(ctx.t("quiz.reveal"), key=f"{key}.reveal", disabled=guess is None or held["revealed"] is not None):
            held["revealed"] = guess
            score["asked"] += 1
            score["right"] += guess == question.answer
        if held["revealed"] is not None:
            answer = choice_text(ctx, question, question.answer)
            why = why_sep(ctx).join(piece_text(ctx, p) for p in question.why)
            if held["revealed"] == question.answer:
                st.success(ctx.t("quiz.right", answer=answer) + f"  \n{why}", icon=":material/check_circle:")
            else:
                st.error(ctx.t("quiz.wrong", guess=choice_text(ctx, question, held["revealed"]), answer=answer)
                         + f"  \n{why}", icon=":material/cancel:")
            if watch:
                st.caption(ctx.t("quiz.watch"))
        c1, c2 = st.columns([2, 1], vertical_alignment="center")  # room for "Another question" at 1024 px
        c1.caption(ctx.t("quiz.score", right=score["right"], asked=score["asked"]))
        c2.button(ctx.t("quiz.another"), key=f"{key}.another_btn",
                  on_click=lambda: st.session_state.__setitem__(f"{key}.another", True))
    return question
