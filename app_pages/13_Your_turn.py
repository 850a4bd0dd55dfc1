"""13 · Your turn: the learner's own code (the folder PAGED_EXERCISES names), checked, its first
broken link marked in the chain, and drawn with pages 1–4's pictures: its locate(), the pool its
block manager laid out, the engine on its code beside the contiguous twin."""

import pandas as pd
import streamlit as st

import ui
from lessons import exercises as lesson
from paged.exercises.texts import hint
from viz.chain import chain_figure
from viz.pool import PoolWords, pool_figure

ctx, knobs = ui.page_header("exercises", ":material/edit_note:")
directory = lesson.workspace_dir()
if (
    directory is None
):  # the page is not in the navigation then; run on its own it only says how to switch it on
    st.info(ctx.t("off"))
    st.stop()

st.caption(ctx.t("folder", path=str(directory)))
stamp = lesson.fingerprint(directory)
view = st.session_state.get("exercises.view")
recheck = st.button(ctx.t("recheck"), icon=":material/refresh:")
if recheck or view is None or st.session_state.get("exercises.stamp") != stamp:
    with st.spinner(ctx.t("checking")):
        # a child process: a hang in the learner's code is killed, never the server's
        view = lesson.check(directory)
    st.session_state["exercises.view"], st.session_state["exercises.stamp"] = view, stamp
if view.error:
    ui.stop_with_error(ctx, ctx.t("no_workspace", error=view.error), "")

# --- verdicts, and the chain with the first broken link marked
# ------------------------------------------------------
st.subheader(ctx.t("verdicts"))
done = {r["exercise"]: r for r in view.records}
rows = [
    {
        ctx.t("col_exercise"): name,
        ctx.t("col_ok"): ctx.t("not_run")
        if name not in done
        else ctx.t("yes" if done[name]["ok"] else "no"),
        ctx.t("col_link"): (done[name]["link"] or "—")
        if name in done and not done[name]["ok"]
        else "",
        ctx.t("col_seconds"): done[name]["seconds"] if name in done else None,
    }
    for name in lesson.EXERCISE_NAMES
]
st.dataframe(pd.DataFrame(rows), hide_index=True)
failure = view.failure
if view.passed:
    st.success(ctx.t("all_green", n=len(lesson.EXERCISE_NAMES)))
elif failure is not None:
    st.error(ctx.t("failed", exercise=failure["exercise"]))
    st.code(lesson.message(failure, ctx.lang), language=None)
    with st.expander(ctx.t("hint")):
        st.write(hint(failure, ctx.lang))

st.subheader(ctx.t("chain"))
colour = {"ok": "green", "broken": "red", "unknown": "gray"}
st.markdown(" → ".join(f":{colour[state]}-background[{link}]" for link, state in view.marks))
st.caption(ctx.t("chain_caption"))

chain = view.chain()
if chain:
    token = knobs.slider(ctx.t("token"), "token", 5, 0, len(chain) - 1)
    ui.show_figure(
        chain_figure(chain[token], 4, [7, 2, 9], title=ctx.t("locate_title", token=token)),
        "exercises.chain",
    )
else:
    st.caption(ctx.t("no_chain"))

# --- the engine on the learner's code, step by step, beside its twin
# -------------------------------------------------
st.subheader(ctx.t("engine"))
data = view.data("engine")
if not data or not data.get("steps"):
    st.caption(ctx.t("no_engine"))
    knobs.sync_url(ctx.lang)
    st.stop()
last = len(data["steps"]) - 1
step = knobs.slider(ctx.t("step"), "step", last, 0, last) if last > 0 else 0
knobs.sync_url(ctx.lang)
shown = lesson.engine_step(data, step)
record = shown["record"]
st.caption(
    ctx.t(
        "step_caption",
        step=step,
        phase=ctx.t("prefill" if record["prefill"] else "decode"),
        seqs=record["seqs"],
        lens=record["context_lens"],
        slots=record["slots"],
        tokens=record["tokens"],
    )
)
ui.show_figure(
    pool_figure(
        data["num_blocks"],
        data["block_size"],
        shown["tables"],
        shown["cached"],
        highlight=record["slots"],
        title=ctx.t("pool_title", step=step),
        words=ui.viz_labels(ctx, PoolWords, "common.pool"),
    ),
    "exercises.pool",
)
texts = pd.DataFrame(
    [
        {
            ctx.t("col_request"): i,
            ctx.t("col_yours"): got,
            ctx.t("col_twin"): twin,
            ctx.t("col_same"): ctx.t("yes") if got == twin else ctx.t("no"),
        }
        for i, (got, twin) in enumerate(
            zip(data.get("got") or [""] * len(data["twin"]), data["twin"])
        )
    ]
)
st.dataframe(texts, hide_index=True)
