"""Break it where it is taught: the knobs and the results of page 2's and page 3's deliberate bugs (the math is in
lessons.gather_breaks and lessons.batch).

Page 2:   no_mask, ctx_off = gather_knobs(ctx, knobs, mode)      # before knobs.sync_url: they live in the URL
          show_gather_breaks(ctx, lesson, step, no_mask, ctx_off)
Page 3:   arm_wrong_slot(lesson)                                    # before the actions: the next Decode is broken
          wrong_slot_controls(ctx, knobs, lesson)                   # after them, before knobs.sync_url
"""

from __future__ import annotations

import streamlit as st

from lessons.gather_breaks import OFFSETS, context_len_off, without_causal_mask
from viz.attention import diverging_figure
from viz.breaks import row_diff_figure
from viz.colors import seq_label

from .params import one_of, read_param
from .widgets import notice, show_figure

WRONG, WRONG_SEQ = "batch.wrong", "batch.wrong_seq"  # page 3's switch and its target (widget keys, in the URL)
ARMED = "batch._wrong_armed"  # (lesson, seq_id): what the switch last armed, kept until it arms again


# --- page 2 · Gather & attend ---------------------------------------------------------------------------------------
def gather_knobs(ctx, knobs, mode: str) -> tuple[bool, int]:
    """The "break it" switches (URL: no_mask=0/1, ctx_off=0/-1/1 in decode). Returns (no_mask, ctx_off)."""
    with st.container(border=True):
        c0, c1, c2 = st.columns([0.6, 1.4, 1.4], vertical_alignment="center")
        c0.markdown(f":material/build: **{ctx.t('breaks.header')}**")
        no_mask = knobs.toggle(ctx.t("breaks.no_mask"), "no_mask", False, where=c1, help=ctx.t("breaks.no_mask_help"))
        ctx_off = 0
        if mode == "decode":
            ctx_off = knobs.select(ctx.t("breaks.ctx_off"), "ctx_off", 0, list(OFFSETS), where=c2,
                                   format_func=lambda d: ctx.t(f"breaks.off_{d}"), help=ctx.t("breaks.ctx_off_help"))
    return no_mask, ctx_off


def show_gather_breaks(ctx, lesson, step: int, no_mask: bool, ctx_off: int) -> None:
    """What the chosen bugs do to the lesson's attention (once the gather is complete)."""
    if not no_mask and not ctx_off:
        return
    n = lesson.config.context_len
    st.header(ctx.t("breaks.header"))
    if step < n:
        st.info(ctx.t("breaks.wait"), icon=":material/hourglass_empty:")
        return
    if no_mask:
        br = without_causal_mask(lesson)
        st.subheader(ctx.t("breaks.mask_header"))
        fig_col, note_col = st.columns([3, 1])
        fig = row_diff_figure(br.positions, br.row_diff, br.changed, title=ctx.t("breaks.mask_title"),
                              x_title=ctx.t("breaks.mask_x"))
        show_figure(fig, "gather.break_mask", where=fig_col)
        note_col.metric(ctx.t("breaks.mask_changed"), f"{br.changed_rows} / {len(br.changed)}")
        key = "breaks.mask_decode" if lesson.config.mode == "decode" else "breaks.mask_prefill"
        notice(ctx, ctx.t(key, changed=br.changed_rows, rows=len(br.changed), worst=f"{max(br.row_diff):.2e}",
                          last=n - 1), where=note_col)
        st.session_state["gather.mask_break"] = br  # what the tests read back
    if ctx_off:
        br = context_len_off(lesson, ctx_off)
        st.subheader(ctx.t("breaks.len_header", told=br.context_len, context_len=n))
        st.session_state["gather.len_break"] = br
        if not br.possible:
            st.warning(ctx.t("breaks.len_minus_impossible"), icon=":material/block:")
            return
        worst = f"{br.max_abs_err:.2e}"
        if ctx_off < 0:
            text = ctx.t("breaks.len_minus", dropped=br.dropped_token, worst=worst)
        elif br.past_table:
            text = ctx.t("breaks.len_plus_past", context_len=n, slot=br.slot_read, token=br.holds_token, worst=worst)
        else:
            text = ctx.t("breaks.len_plus_empty", context_len=n, slot=br.slot_read, worst=worst)
        fig_col, note_col = st.columns([3, 1])
        fig = diverging_figure(br.diff.float(), title=ctx.t("breaks.len_diff_title", told=br.context_len),
                               y_labels=[f"h{h}" for h in range(br.diff.shape[0])], x_title="head_dim")
        show_figure(fig, "gather.break_len", where=fig_col)
        note_col.metric(ctx.t("common.max_abs_err"), worst)
        note_col.metric(ctx.t("breaks.verdict"), ctx.t("common.ok") if br.ok else ctx.t("common.not_ok"))
        notice(ctx, text, where=note_col)


# --- page 3 · Batch decode --------------------------------------------------------------------------------------
def _used_up(lesson) -> bool:
    """Whether the decode the switch armed has run, whoever ran it (a button callback before this run, or this run),
    or the lesson it armed was replaced (reset, settings): the lesson shown is then no longer the one left armed."""
    armed_demo, armed = st.session_state.get(ARMED, (None, None))
    return armed is not None and (armed_demo is not lesson or lesson.armed is None)


def arm_wrong_slot(lesson) -> None:
    """Before the page's actions: arm the lesson from the switch's last value, so its next decode is the broken one.
    If the decode armed before has run since (or the lesson is new), the switch goes off first."""
    if _used_up(lesson):
        st.session_state[WRONG] = False
    running = [s.seq_id for s in lesson.playground.running()]
    if WRONG not in st.session_state:  # the first run of a visit: a link's wrong=1 arms the very first Decode
        st.session_state[WRONG] = bool(read_param("wrong", one_of([0, 1]), 0))
        if running and WRONG_SEQ not in st.session_state:
            st.session_state[WRONG_SEQ] = read_param("wrong_seq", one_of(running), running[0])
    target = st.session_state.get(WRONG_SEQ) if st.session_state.get(WRONG) else None
    lesson.arm_wrong_slot(target if target in running else None)
    st.session_state[ARMED] = (lesson, lesson.armed)


def wrong_slot_controls(ctx, knobs, lesson) -> None:
    """After the page's actions: the switch (off again once its decode ran), its target, and what the last broken
    step did. The switch and its target live in the URL (wrong=1, wrong_seq=<id>)."""
    if _used_up(lesson):
        st.session_state[knobs.key("wrong")] = False  # its decode ran in this run: the switch goes off
    running = [s.seq_id for s in lesson.playground.running()]
    c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
    on = knobs.toggle(ctx.t("breaks.wrong_toggle"), "wrong", False, where=c1, help=ctx.t("breaks.wrong_help"),
                      disabled=not running)
    if running:
        seq = knobs.select(ctx.t("breaks.wrong_seq"), "wrong_seq", running[0], running, where=c2,
                           format_func=seq_label)
        if on:
            c1.caption(ctx.t("breaks.wrong_armed", seq=seq_label(seq)))
    m = lesson.last_event.misplaced if lesson.last_event.ok else None
    if m is not None:
        failing = [c.seq_id for c in lesson.checks if not c.ok]
        st.error("  \n".join(misplaced_lines(ctx, m, failing)), icon=":material/bug_report:")


def misplaced_lines(ctx, m, failing: list[int]) -> list[str]:
    """What a write one slot too far did (a lessons.batch.Misplaced), and whose checks now fail, as text lines."""
    values = dict(seq=seq_label(m.seq_id), token=m.token_index, slot=m.slot, written=m.written,
                  victim=seq_label(m.victim) if m.victim is not None else "", victim_token=m.victim_token)
    if m.written < 0:
        why = "wrong_past"
    elif m.victim == m.seq_id:
        why = "wrong_self"
    elif m.victim is not None:
        why = "wrong_overwrote" if m.overwrote else "wrong_reserved"
    else:
        why = "wrong_free"
    return ([ctx.t("breaks.wrong_what", **values)] if m.written >= 0 else []) + [
        ctx.t(f"breaks.{why}", **values), ctx.t("breaks.wrong_checks", seqs=", ".join(map(seq_label, failing)) or "—")]
