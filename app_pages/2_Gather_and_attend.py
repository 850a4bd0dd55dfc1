"""2 · Gather & attend: one sequence read back through its block table, token by token, then plain attention."""

import inspect

import streamlit as st

import ui
from ui.breaks import gather_breaks, gather_knobs, show_gather_breaks
from ui.playback import Stepper, playback_bar
from paged.addressing import blocks_needed
from paged.attention import gather_kv_loop
from viz.attention import StripWords, diverging_figure, kv_strip_figure, mask_figure, weights_figure
from viz.chain import chain_figure
from viz.pool import PoolWords, pool_figure
from lessons.address import DTYPES
from lessons.gather import MAX_POOL_BLOCKS, GatherConfig, GatherLesson

MAX_ROWS = 48  # prefill figures show at most the last 48 queries


def short(values: list[int], keep: int = 8) -> str:
    """[44, 39, 7, …] for a title: the first `keep` entries of a long list."""
    return str(values) if len(values) <= keep else "[" + ", ".join(map(str, values[:keep])) + ", …]"


ctx = ui.setup_page("gather", icon=":material/merge:")
knobs = ui.Knobs("gather")
st.title(ctx.t("title"))
ui.page_intro(ctx)

with st.sidebar:
    st.header(ctx.t("common.settings"))
    num_heads = knobs.select(ctx.t("common.num_heads"), "num_heads", 4, [1, 2, 4, 8, 16])
    num_kv_heads = knobs.select(ctx.t("common.num_kv_heads"), "num_kv_heads", 2, [1, 2, 4, 8, 16])
    head_dim = knobs.select(ctx.t("common.head_dim"), "head_dim", 8, [4, 8, 16, 32, 64, 128, 256])
    context_len = knobs.slider(ctx.t("common.context_len"), "context_len", 10, 1, 512)
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 4, [1, 2, 4, 8, 16, 32])
    dtype = knobs.select(ctx.t("common.dtype"), "dtype", "float32", list(DTYPES))
    seed = knobs.number(ctx.t("common.seed"), "seed", 0, 0, 9999)
    ui.device_badge(ctx, dtype)

mode = knobs.radio(ctx.t("mode"), "mode", "decode", ["decode", "prefill"], horizontal=True,
                   format_func=lambda m: ctx.t(f"mode_{m}"))
q_len = 1
if mode == "prefill":
    q_len = (knobs.slider(ctx.t("q_len"), "q_len", context_len, 1, context_len, help=ctx.t("q_len_help"))
             if context_len > 1 else 1)
step = min(knobs.state("step", 0, ui.int_in(0, 512), ("steps",)), context_len)
no_mask, ctx_off = gather_knobs(ctx, knobs, mode)  # break it: no causal mask, context_len off by one

# friendly refusals before any tensor is made
if num_heads % num_kv_heads:
    knobs.sync_url(ctx.lang, step=step)
    options = ", ".join(str(k) for k in (1, 2, 4, 8, 16) if num_heads % k == 0)
    ui.stop_with_error(ctx, ctx.t("err_gqa", num_heads=num_heads, num_kv_heads=num_kv_heads),
                       ctx.t("fix_gqa", num_heads=num_heads, options=options))
if blocks_needed(context_len, block_size) > MAX_POOL_BLOCKS:
    knobs.sync_url(ctx.lang, step=step)
    fits = next((b for b in (1, 2, 4, 8, 16, 32) if blocks_needed(context_len, b) <= MAX_POOL_BLOCKS), 32)
    ui.stop_with_error(ctx, ctx.t("err_pool", context_len=context_len, block_size=block_size,
                                  needed=blocks_needed(context_len, block_size), max_blocks=MAX_POOL_BLOCKS),
                       ctx.t("fix_pool", fits=fits, max_len=MAX_POOL_BLOCKS * block_size))

config = GatherConfig(num_heads, num_kv_heads, head_dim, context_len, block_size, dtype, seed, mode, q_len)
lesson = st.session_state.get("gather.lesson")
if lesson is None or lesson.config != config:
    try:
        lesson = GatherLesson(config)
    except ValueError as err:
        ui.stop_with_error(ctx, ctx.t("common.err_unexpected", message=err), ctx.t("common.fix_unexpected"))
    st.session_state["gather.lesson"] = lesson

# --- the teaching loop, one read per click (callbacks: they run before the page is drawn) --------------------------
def move(by: int | None = None, to: int | None = None) -> bool:
    """Set the step (clamped to 0..context_len of the lesson in session_state); False when it did not change."""
    now, end = st.session_state["gather.step"], st.session_state["gather.lesson"].config.context_len
    new = max(0, min(end, now + by if by is not None else to))
    st.session_state["gather.step"] = new
    return new != now


@st.fragment
def gather_view() -> None:
    """Everything a step, All or Reset changes (st.fragment): these rerun only this part, not the page
    setup, the sidebar and the lesson above it. It reads the step afresh from session_state."""
    step = min(knobs.state("step", 0, ui.int_in(0, 512), ("steps",)), context_len)
    bar = playback_bar(ctx, knobs, Stepper(
        "gather", step_key="gather.next", position=step, total=context_len,
        can_forward=step < context_len, can_back=step > 0, forward=lambda: move(by=1), back=lambda: move(by=-1)))
    bar.row.button(ctx.t("all"), key="gather.all", disabled=step >= context_len, icon=":material/fast_forward:",
                   on_click=move, kwargs={"to": context_len})
    bar.row.button(ctx.t("common.reset"), key="gather.reset", icon=":material/restart_alt:", on_click=move,
                   kwargs={"to": 0})
    knobs.set_state("step", step)
    knobs.sync_url(ctx.lang, step=step)
    # break it: next to the switches, what broke and what differs; the figures below then draw the broken run
    breaks = gather_breaks(lesson, step, no_mask, ctx_off)
    show_gather_breaks(ctx, lesson, breaks)
    broken = breaks.shown if breaks else None  # a MaskBreak or LenBreak, or None

    current = lesson.addresses[step - 1] if step else None
    if current:
        chain = chain_figure(current, block_size, lesson.block_table,
                             title=ctx.t("current_read", step=step, token_index=current.token_index))
        ui.show_figure(chain, "gather.chain")
        bar.say(ctx.t("current_read", step=step, token_index=current.token_index))
    else:
        st.info(ctx.t("press_next"), icon=":material/touch_app:")
        bar.say(ctx.t("press_next"))
    pool = pool_figure(config.num_blocks, block_size, {0: lesson.block_table}, {0: context_len},
                       highlight=[current.slot] if current else [], read=lesson.read_slots(step - 1),
                       title=ctx.t("pool_title", num_blocks=config.num_blocks, block_table=short(lesson.block_table)),
                       words=ui.viz_labels(ctx, PoolWords, "common.pool"))
    pool_col, note_col = st.columns([3, 1])
    ui.show_figure(pool, "gather.pool", where=pool_col)
    ui.notice(ctx, ctx.t("pool_notice"), where=note_col)

    keys, _ = lesson.gathered(step)  # what the loop has produced so far: [step, num_kv_heads, head_dim]
    strip = kv_strip_figure(lesson.addresses, step, title=ctx.t("strip_title", shape=list(keys.shape)),
                            words=ui.viz_labels(ctx, StripWords, "strip"))
    ui.show_figure(strip, "gather.strip")
    with st.expander(ctx.t("loop_heading")):
        st.code(inspect.getsource(gather_kv_loop), language="python")

    # --- attention over the gathered K/V, checked against the contiguous cache ----------------------------------------
    if step < context_len:
        st.info(ctx.t("attend_after", remaining=context_len - step), icon=":material/hourglass_top:")
    else:
        result = lesson.result()
        st.subheader(ctx.t("attend_heading"))
        fig_col, note_col = st.columns([3, 1])
        told = broken.context_len if broken is not None and ctx_off else None  # a decode told context_len ± 1
        if mode == "decode":
            weights = weights_figure(result.weights if told is None else broken.weights, weight=ctx.t("weight"),
                                     title=ctx.t("weights_title") if told is None else
                                     ctx.t("weights_title_told", told=told))
            ui.show_figure(weights, "gather.weights", where=fig_col)
            ui.notice(ctx, ctx.t("weights_notice", group=num_heads // num_kv_heads), where=note_col)
            fig_col, note_col = st.columns([3, 1])
            output = diverging_figure((result.paged if told is None else broken.output).float(), x_title="head_dim",
                                      title=ctx.t("output_title") if told is None else
                                      ctx.t("output_title_told", told=told), y_title="head")
            ui.show_figure(output, "gather.output", where=fig_col)
            ui.notice(ctx, ctx.t("output_notice"), where=note_col)
            diff = result.paged.double() - result.reference if broken is None else broken.diff.reshape(
                result.reference.shape)  # [num_heads, head_dim]
            diff_rows = [f"h{h}" for h in range(num_heads)]
        else:
            rows = min(q_len, MAX_ROWS)
            first = context_len - rows
            if rows < q_len:
                fig_col.caption(ctx.t("rows_cut", rows=rows, q_len=q_len))
            mask_rows = lesson.mask_rows(rows) if broken is None else [[True] * context_len] * rows  # what ran
            ui.show_figure(mask_figure(mask_rows, title=ctx.t("mask_title" if broken is None else "mask_title_off"),
                                       visible=ctx.t("mask_visible"), masked=ctx.t("mask_masked")), "gather.mask",
                           where=fig_col)
            ui.notice(ctx, ctx.t("mask_notice", start=context_len - q_len) if broken is None
                      else ctx.t("mask_notice_off"), where=note_col)
            fig_col, note_col = st.columns([3, 1])
            head = note_col.selectbox(ctx.t("head"), list(range(num_heads)), key="gather.head")
            shown = result.weights if broken is None else broken.weights  # [num_heads, q_len, context_len]
            weights = weights_figure(shown[head, -rows:], y_labels=[f"q{first + i}" for i in range(rows)],
                                     title=ctx.t("prefill_weights_title" if broken is None else
                                                 "prefill_weights_title_off", head=head),
                                     y_title="query", weight=ctx.t("weight"))
            ui.show_figure(weights, "gather.weights", where=fig_col)
            note_col.metric(ctx.t("future_weight"), f"{result.future_weight:.1%}", help=ctx.t("future_help"))
            ui.notice(ctx, ctx.t("prefill_notice" if broken is None else "prefill_notice_off"), where=note_col)
            full = result.paged.double() - result.reference if broken is None else broken.diff
            diff = full[-rows:, head]  # [rows, head_dim]
            diff_rows = [f"q{first + i}" for i in range(rows)]

        if broken is None:
            err, rel, ok = result.max_abs_err, result.rel_err, result.ok
            st.subheader(ctx.t("common.check"))
        else:
            err, rel, ok = broken.max_abs_err, broken.rel_err, broken.ok
            what = ctx.t("breaks.what_mask") if told is None else ctx.t("breaks.what_len", told=told,
                                                                         context_len=context_len)
            st.subheader(ctx.t("check_broken", what=what))
        m1, m2, m3, m4 = st.columns(4)
        m1.metric(ctx.t("common.max_abs_err"), f"{err:.2e}")
        m2.metric(ctx.t("common.rel_err"), f"{rel:.2e}")
        m3.metric(ctx.t("common.tolerance", dtype=dtype), f"{result.tolerance:.0e}")
        m4.metric(ctx.t("verdict"), ctx.t("common.ok") if ok else ctx.t("common.not_ok"))
        fig_col, note_col = st.columns([3, 1])
        diff_fig = diverging_figure(diff.float(), title=ctx.t("diff_title" if broken is None else "diff_title_broken"),
                                    y_labels=diff_rows, x_title="head_dim")
        ui.show_figure(diff_fig, "gather.diff", where=fig_col)
        if broken is not None:
            ui.notice(ctx, ctx.t("broken_notice"), where=note_col)
        else:
            ui.notice(ctx, ctx.t("bitwise_yes" if result.bitwise_equal else "bitwise_no", dtype=dtype,
                                 err=f"{result.max_abs_err:.2e}", rel=f"{result.rel_err:.2e}",
                                 tol=f"{result.tolerance:.0e}"), where=note_col)

    ui.export_button(ctx, lambda: lesson.trace(step), "gather_trace.json", key="gather.export")


gather_view()
