"""Pages 4 and 6: the "real vLLM" column (lessons.vllm_side), or one line saying how to install it."""

from __future__ import annotations

from typing import Callable

import streamlit as st

from lessons.vllm_side import VLLM_VERSION, VllmSide, vllm_available
from paged.chapters.vllm_twin import INSTALL_HINT

from .page import PageContext
from .widgets import state_table


def show_vllm_side(ctx: PageContext, lesson, label: Callable[[int], str], page: str) -> None:
    """The header and the rules we mirror, then: without vLLM one install line; else the verdict and the last
    step's tables side by side.
    The replay lives in st.session_state["<page>.vllm_side"] (per user) and replays only new steps."""
    st.subheader(ctx.t("vllm.header"))
    st.caption(ctx.t("vllm.caption", version=VLLM_VERSION))  # the rules we mirror, with or without vLLM here
    if not vllm_available():
        st.caption(ctx.t("vllm.missing", hint=INSTALL_HINT))
        return
    key = f"{page}.vllm_side"
    try:
        side = st.session_state[key] = VllmSide.follow(st.session_state.get(key), lesson)
    except Exception as err:  # noqa: BLE001 (an optional, third-party library: say what went wrong, no traceback)
        st.warning(ctx.t("vllm.error", error=f"{type(err).__name__}: {err}"), icon=":material/warning:")
        return
    if not side.steps and side.verdict is None:
        st.info(ctx.t("vllm.none"))
        return
    v = side.verdict
    if v is None:
        st.success(ctx.t("vllm.identical", steps=len(side.steps)), icon=":material/check_circle:")
    else:
        values = dict(v.values)
        if "seq" in values:
            values["seq"] = label(values["seq"])
        if "seqs" in values:
            values["seqs"] = ", ".join(label(s) for s in values["seqs"])
        st.warning(ctx.t("vllm.differs", step=v.step, why=ctx.t(f"vllm.why_{v.code}", **values)),
                   icon=":material/difference:")
    if side.steps:
        last = side.steps[-1]
        st.markdown(ctx.t("vllm.step_title", step=last.step, ours=last.free_ours, theirs=last.free_theirs))
        hits = lambda s: "—" if s.hits_ours is None else f"{s.hits_ours} / {s.hits_theirs}"  # noqa: E731
        rows = [{ctx.t("vllm.col_seq"): label(s.seq_id), ctx.t("vllm.col_ours"): str(list(s.ours)),
                 ctx.t("vllm.col_theirs"): str(list(s.theirs)), ctx.t("vllm.col_hits"): hits(s),
                 ctx.t("vllm.col_same"): ctx.t("vllm.yes" if s.same else "vllm.no")} for s in last.seqs]
        if rows:
            state_table(rows, key=f"{page}.vllm_tables")
