"""10 · Swap or recompute: one scenario under memory pressure, preempted by swapping and by recompute, side by side."""

import contextlib

import streamlit as st

import ui
import ui.quiz
from lessons.swap import (BLOCK_SIZES, BREAK_CHOICES, DEFAULT_NUM_BLOCKS, MAX_TOKENS, SwapConfig, SwapLesson,
                          min_num_blocks, step_words)
from benchmarks.swap import measure
from ui.breaks import break_box
from ui.engine_actions import engine_model, explain_step
from ui.playback import Stepper, playback_bar
from ui.widgets import show_cells, viz_labels
from viz.colors import seq_label
from viz.swap import CostWords, SwapWords, cost_figure, pools_html

MEASURE_SIZES, MEASURE_TOKENS, MEASURE_REPEATS = (1, 4, 16, 64), 128, 3
ICONS = {"out_msg": ":material/upload:", "in_msg": ":material/download:",
         "recompute_msg": ":material/delete:", "back_msg": ":material/calculate:"}

ctx, knobs = ui.page_header("swap", ":material/swap_horiz:")
quiz_on = ui.quiz.enabled(knobs)
model, tokenizer = engine_model(ctx)  # the shipped model

with st.sidebar:
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 4, list(BLOCK_SIZES),
                              help=ctx.t("block_size_help"))
    lo = min_num_blocks(block_size, tokenizer)
    num_blocks = knobs.slider(ctx.t("common.num_blocks"), "num_blocks", DEFAULT_NUM_BLOCKS[block_size], lo, lo + 24,
                              help=ctx.t("num_blocks_help"))
    swap_space = knobs.slider(ctx.t("swap_space"), "swap_space", 16, 1, 48, help=ctx.t("swap_space_help"))
    ui.device_badge(ctx, "float32")
view_slot = ui.key_figure_slot(ctx)  # presenter mode: the stepping view first, Break it under it
break_it = knobs.select(ctx.t("break"), "break", "off", list(BREAK_CHOICES), where=break_box(ctx, (0.8, 2.2)),
                        format_func=lambda b: ctx.t(f"break_{b}"))

config = SwapConfig(block_size, num_blocks, swap_space, break_it)
lesson = st.session_state.get("swap.lesson")
if lesson is None or lesson.config != config:
    lesson = SwapLesson(config, model, tokenizer)
    st.session_state["swap.lesson"] = lesson
words = viz_labels(ctx, SwapWords, "cell")


def move(by: int) -> bool:
    """Forward (+1) or Back (-1) through the precomputed runs; False at either end."""
    k = st.session_state["swap.step"] + by
    if not 0 <= k <= st.session_state["swap.lesson"].total:
        return False
    st.session_state["swap.step"] = k
    return True


def labels(ids) -> str:
    return ", ".join(seq_label(s) for s in ids) or "—"


def mode_column(col, run, title: str, swap: bool, step: int, said_on_bar: str | None) -> None:
    """One mode at `step`: its reason, what left and came back, both pools, its costs so far. Messages are
    markdown lines, not alert boxes: a row of columns holding an alert is stacked on a narrow screen (ui.present),
    and these two columns are the side-by-side comparison."""
    col.subheader(title)
    figure = col.container() if ctx.present else col  # presenter mode: the pools under the title
    col.caption(f'SchedulerConfig(  \npreemption_mode="{"swap" if swap else "recompute"}"'  # a narrow column: break
                + (f",  \nswap_space={swap_space})" if swap else ")"))                             # between arguments
    state = run.at(step)
    if state is None:
        col.caption(ctx.t("no_step"))
        show_cells(pools_html(num_blocks, {}, swap_space if swap else 0, {}, {}, {}, words=words),
                   ctx.t("pools_title" if swap else "pool_title", step=0), f"swap.pools_{swap}",
                   where=figure)
        return
    trace = state.trace
    if step > len(run.steps):
        col.caption(ctx.t("ended", step=len(run.steps)))
    else:
        said_there = ctx.present and (swap or explain_step(ctx, trace.why) == said_on_bar)
        if not said_there:  # presenter mode: said once, on the bar's line
            col.markdown(explain_step(ctx, trace.why))
        for key, values in step_words(state):
            said = ctx.t(key, **{**values, "seq": seq_label(values["seq"])})
            col.markdown(f"{ICONS[key]} {said}")
    now = step <= len(run.steps)
    markup = pools_html(num_blocks, state.tables, swap_space if swap else 0, state.swap_tables,
                        trace.swap_out if now else {}, trace.swap_in if now else {},
                        {s: b for s, b in trace.blocks_freed.items() if s in trace.preempted} if now else {},
                        words, state.handed() if now else {})
    show_cells(markup, ctx.t("pools_title" if swap else "pool_title", step=min(step, len(run.steps))),
               f"swap.pools_{swap}", where=figure)
    if swap:
        col.caption(ctx.t("swapped_now", seqs=labels(state.swap_tables)))


def mode_costs(col, run, step: int) -> None:
    """One mode's costs so far, in a row of their own below the columns: a row holding metrics is bottom-aligned
    (ui.present), which would shift the two columns above against each other."""
    state = run.at(step)
    m1, m2, m3 = col.columns(3)
    m1.metric(ctx.t("metric_copied"), state.blocks_copied if state else 0)
    m2.metric(ctx.t("metric_bytes"), f"{(state.blocks_copied if state else 0) * lesson.bytes_per_block / 1024:.0f} KiB")
    m3.metric(ctx.t("metric_recomputed"), state.tokens_recomputed if state else 0)
    col.caption(f"{ctx.t('metric_preempt')}: {state.swaps if state else 0} / {state.recomputes if state else 0}")


@st.fragment
def swap_view() -> None:
    """Everything a step, Back or Reset changes (st.fragment): a click or a play tick reruns only this part, not
    the sidebar, the break box or the live measurement below (nor the Export button: a tick no longer redraws it)."""
    step = knobs.step("step", lesson.total)  # ?step=N (?steps=N too), clamped to the run's end with a note
    slot = ui.key_figure_slot(ctx)  # presenter mode: the bar and both pools first
    bar = playback_bar(ctx, knobs, Stepper("swap", step_key="swap.step_btn",
                                           position=step, can_forward=step < lesson.total, can_back=step > 0,
                                           forward=lambda: move(1), back=lambda: move(-1),
                                           total=lesson.total), where=slot)
    bar.row.button(ctx.t("common.reset"), key="swap.reset", icon=":material/restart_alt:", disabled=step == 0,
                   on_click=lambda: st.session_state.update({"swap.step": 0}))  # back to step 0, as on pages 4-6
    st.caption(ctx.t("scenario", max_tokens=MAX_TOKENS))
    if quiz_on:
        ui.quiz.show(ctx, "swap", (config, step), lambda seed: lesson.question(step, seed), "swap.none_quiz")
    knobs.sync_url(ctx.lang)

    current = lesson.swap.at(step)
    said_on_bar = (explain_step(ctx, current.trace.why)  # what the swap run did: presenter mode's line
                   if current is not None and step <= len(lesson.swap.steps) else None)
    if said_on_bar is not None:
        bar.say(said_on_bar)
    left, right = (slot or st).columns(2)
    mode_column(left, lesson.swap, ctx.t("col_swap"), True, step, said_on_bar)
    mode_column(right, lesson.recompute, ctx.t("col_recompute"), False, step, said_on_bar)
    for col, run in zip(st.columns(2), (lesson.swap, lesson.recompute)):
        mode_costs(col, run, step)
    ui.notice(ctx, ctx.t("notice"))

    broken_at = lesson.twin_break()
    if broken_at is not None and broken_at <= step:
        st.error(ctx.t("twin_bad", step=broken_at, worst=f"{lesson.diffs[broken_at - 1][0]:.2e}") + " "
                 + ctx.t("tokens_hide"), icon=":material/bug_report:")
    elif broken_at is not None:
        st.caption(ctx.t("twin_later", step=broken_at))
    elif step:
        st.success(ctx.t("twin_ok"), icon=":material/check_circle:")
    if step >= lesson.total:
        st.markdown(ctx.t("same_tokens" if lesson.same_tokens() else "different_tokens"))


with view_slot if view_slot is not None else contextlib.nullcontext():
    swap_view()

# --- the live measurement -------------------------------------------------------------------------------------------
st.subheader(ctx.t("measure_header"))
if st.button(ctx.t("measure_button"), key="swap.measure", icon=":material/timer:"):
    with st.spinner(ctx.t("measuring")):
        st.session_state["swap.measured"] = measure(model, MEASURE_SIZES, MEASURE_TOKENS, MEASURE_REPEATS)
rows = st.session_state.get("swap.measured")
if rows:
    cost_words = viz_labels(ctx, CostWords, "cost")
    ui.show_figure(cost_figure(rows, MEASURE_TOKENS, MEASURE_REPEATS, cost_words), "swap.cost")
    ui.state_table([{"block_size": r["block_size"], ctx.t("metric_copied"): 2 * r["blocks"],
                     "KiB": round(r["swap_bytes"] / 1024), ctx.t("cost_swap"): f"{r['swap_ms']:.3f}",
                     ctx.t("cost_per_block"): f"{r['swap_per_block_ms']:.3f}",
                     ctx.t("cost_recompute"): f"{r['recompute_ms']:.2f}",
                     ctx.t("col_ratio"): f"{r['recompute_over_swap']:.1f}"} for r in rows], key="swap.cost_table")
    st.caption(ctx.t("measure_caption", tokens=MEASURE_TOKENS, repeats=MEASURE_REPEATS))
st.markdown(ctx.t("paper_note"))


def export() -> dict:
    """Both runs, step by step (traces, tables, costs so far), made only when the button is pressed."""
    def steps(run) -> list[dict]:
        return [{"trace": s.trace.to_dict(), "swap_tables": s.swap_tables, "blocks_copied": s.blocks_copied,
                 "tokens_recomputed": s.tokens_recomputed} for s in run.steps]
    return {"config": config.__dict__, "swap": steps(lesson.swap), "recompute": steps(lesson.recompute),
            "measured": st.session_state.get("swap.measured")}


ui.export_button(ctx, export, "swap_trace.json", key="swap.export")  # as on pages 4-6, 9 and 12
