"""Break it where it is taught: the knobs and the results of page 2's and page 3's deliberate bugs (the math is in
lessons.gather_breaks and lessons.batch).

Page 2:   no_mask, ctx_off = gather_knobs(ctx, knobs, mode)      # before knobs.sync_url: they live in the URL
          br = gather_breaks(lesson, step, no_mask, ctx_off)        # None: no break on
          show_gather_breaks(ctx, lesson, br)                       # at the top: the verdict, each break's figure
Page 3:   arm_wrong_slot(lesson)                                    # before the actions: the next Decode is broken
          wrong_slot_controls(ctx, knobs, lesson)                   # after them, before knobs.sync_url
"""

from __future__ import annotations

import streamlit as st

from dataclasses import dataclass

from lessons.gather_breaks import OFFSETS, LenBreak, MaskBreak, context_len_off, without_causal_mask
from viz.attention import diverging_figure
from viz.breaks import row_diff_figure
from viz.colors import seq_label

from .params import read_param
from .parsers import one_of
from .widgets import notice, show_figure

WRONG, WRONG_SEQ = "batch.wrong", "batch.wrong_seq"  # page 3's switch and its target (widget keys, in the URL)
ARMED = "batch._wrong_armed"  # (lesson, seq_id): what the switch last armed, kept until it arms again


def break_box(ctx, widths=(0.8, 3)):
    """The "Break it" box every chapter page opens its deliberate bugs in (pages 2, 3, 9-12): a bordered row, its
    header on the left; returns the column to its right for the page's switches."""
    with st.container(border=True):
        c0, c1 = st.columns(list(widths), vertical_alignment="center")
        c0.markdown(f":material/build: **{ctx.t('breaks.header')}**")
    return c1


# --- page 2 · Gather & attend ---------------------------------------------------------------------------------------
def gather_knobs(ctx, knobs, mode: str) -> tuple[bool, int]:
    """The "break it" switches (URL: no_mask=0/1, ctx_off=0/-1/1 in decode). Returns (no_mask, ctx_off)."""
    with st.container(border=True):  # break_box's look, with two switches
        c0, c1, c2 = st.columns([0.6, 1.4, 1.4], vertical_alignment="center")
        c0.markdown(f":material/build: **{ctx.t('breaks.header')}**")
        no_mask = knobs.toggle(ctx.t("breaks.no_mask"), "no_mask", False, where=c1, help=ctx.t("breaks.no_mask_help"))
        ctx_off = 0
        if mode == "decode":
            ctx_off = knobs.select(ctx.t("breaks.ctx_off"), "ctx_off", 0, list(OFFSETS), where=c2,
                                   format_func=lambda d: ctx.t(f"breaks.off_{d}"), help=ctx.t("breaks.ctx_off_help"))
    return no_mask, ctx_off


@dataclass
class GatherBreaks:
    """The page-2 breaks switched on, measured (mask / length None: that break is off, or the gather is not complete
    yet: `complete` says which)."""

    no_mask: bool
    ctx_off: int
    complete: bool
    mask: MaskBreak | None = None
    length: LenBreak | None = None

    @property
    def shown(self):
        """The broken run the page's figures draw: context_len off by one when on (in decode the mask changes
        nothing), else no mask; None before the gather is complete or when −1 has nothing to read."""
        if self.length is not None:
            return self.length if self.length.possible else None
        return self.mask


def gather_breaks(lesson, step: int, no_mask: bool, ctx_off: int) -> GatherBreaks | None:
    """What the chosen bugs do to the lesson's attention (measured once the gather is complete); None when no break is
    on. Kept in session_state["gather.mask_break"] / ["gather.len_break"] (what the tests read back)."""
    if not no_mask and not ctx_off:
        return None
    out = GatherBreaks(no_mask, ctx_off, step >= lesson.config.context_len)
    if out.complete and no_mask:
        out.mask = st.session_state["gather.mask_break"] = without_causal_mask(lesson)
    if out.complete and ctx_off:
        out.length = st.session_state["gather.len_break"] = context_len_off(lesson, ctx_off)
    return out


def show_gather_breaks(ctx, lesson, br: GatherBreaks | None) -> None:
    """At the top, next to the switches: the verdict (what broke, what differs), then each break's own figure."""
    if br is None:
        return
    n, dtype = lesson.config.context_len, lesson.config.dtype
    what = ", ".join(([ctx.t("breaks.what_mask")] if br.no_mask else [])
                     + ([ctx.t("breaks.what_len", told=n + br.ctx_off, context_len=n)] if br.ctx_off else []))
    if not br.complete:
        st.info(ctx.t("breaks.wait", what=what, all=ctx.t("gather.all")), icon=":material/hourglass_empty:")
        return
    for b, key in ((br.mask, "mask"), (br.length, "len")):
        if b is None or (key == "len" and not b.possible):
            continue
        if key == "mask" and lesson.config.mode == "decode":
            st.success(ctx.t("breaks.top_mask_decode", worst=f"{b.max_abs_err:.2e}"), icon=":material/check:")
            continue
        values = dict(rel=f"{b.rel_err:.2e}", tol=f"{b.tolerance:.0e}", dtype=dtype, worst=f"{b.max_abs_err:.2e}",
                      told=n + br.ctx_off, context_len=n)
        if key == "mask":
            values.update(changed=b.changed_rows, rows=len(b.changed))
        text = ctx.t(f"breaks.top_{key}{'_ok' if b.ok else ''}", **values)
        (st.success if b.ok else st.error)(text, icon=":material/bug_report:")
    if br.mask is not None:
        b = br.mask
        st.subheader(ctx.t("breaks.mask_header"))
        fig_col, note_col = st.columns([3, 1])
        fig = row_diff_figure(b.positions, b.row_diff, b.changed, title=ctx.t("breaks.mask_title"),
                              x_title=ctx.t("breaks.mask_x"))
        show_figure(fig, "gather.break_mask", where=fig_col)
        note_col.metric(ctx.t("breaks.mask_changed"), f"{b.changed_rows} / {len(b.changed)}")
        key = "breaks.mask_decode" if lesson.config.mode == "decode" else "breaks.mask_prefill"
        notice(ctx, ctx.t(key, changed=b.changed_rows, rows=len(b.changed), worst=f"{b.max_abs_err:.2e}",
                          last=n - 1), where=note_col)
    if br.length is not None:
        b = br.length
        st.subheader(ctx.t("breaks.len_header", told=b.context_len, context_len=n))
        if not b.possible:
            st.warning(ctx.t("breaks.len_minus_impossible"), icon=":material/block:")
            return
        worst = f"{b.max_abs_err:.2e}"
        if br.ctx_off < 0:
            text = ctx.t("breaks.len_minus", dropped=b.dropped_token, worst=worst)
        elif b.past_table:
            text = ctx.t("breaks.len_plus_past", context_len=n, slot=b.slot_read, token=b.holds_token, worst=worst)
        else:
            text = ctx.t("breaks.len_plus_empty", context_len=n, slot=b.slot_read, worst=worst)
        fig_col, note_col = st.columns([3, 1])
        fig = diverging_figure(b.diff.float(), title=ctx.t("breaks.len_diff_title", told=b.context_len),
                               y_labels=[f"h{h}" for h in range(b.diff.shape[0])], x_title="head_dim")
        show_figure(fig, "gather.break_len", where=fig_col)
        note_col.metric(ctx.t("common.max_abs_err"), worst)
        note_col.metric(ctx.t("breaks.verdict"), ctx.t("common.ok") if b.ok else ctx.t("common.not_ok"))
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
        kept = st.session_state.get(f"_keep.{WRONG}", False)  # as ui.params.Knobs seeds a widget: link, last visit
        st.session_state[WRONG] = bool(read_param("wrong", one_of([0, 1]), int(kept)))
        if running and WRONG_SEQ not in st.session_state:
            kept_seq = st.session_state.get(f"_keep.{WRONG_SEQ}", running[0])
            st.session_state[WRONG_SEQ] = read_param("wrong_seq", one_of(running),
                                                     kept_seq if kept_seq in running else running[0])
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
