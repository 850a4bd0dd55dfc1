"""12 · Speculative decoding: guesses checked in one pass, the rejected tail rolled back (cached_token_count and
blocks)."""

import contextlib

import streamlit as st

import ui
import ui.quiz
from lessons.engine_requests import MAX_STEPS
from lessons.spec import BLOCK_SIZES, K_CHOICES, SCENARIOS, SpecConfig, SpecLesson, spec_question
from lessons.tokens import shown_text
from ui.breaks import break_box
from ui.engine_actions import engine_model
from ui.params import STEP_ALIASES, note_past_end
from ui.playback import Stepper, playback_bar
from viz.colors import seq_label
from viz.spec import SpecWords, StepRow, acceptance_figure, step_html


ctx, knobs = ui.page_header("spec", ":material/bolt:")
quiz_on = ui.quiz.enabled(knobs)  # ?quiz=1: predict, then reveal
model, tokenizer = engine_model(ctx)  # the shipped model, loaded once per process (as pages 10 and 11)

with st.sidebar:
    k = knobs.select(ctx.t("k"), "k", 4, list(K_CHOICES))
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 4, list(BLOCK_SIZES))
    scenario = knobs.radio(ctx.t("scenario"), "scenario", "mixed", list(SCENARIOS),
                           format_func=lambda s: ctx.t(f"scenario_{s}"))
    ui.device_badge(ctx, "float32")
view_slot = ui.key_figure_slot(ctx)  # presenter mode: the stepping view first, Break it under it
forget = knobs.toggle(ctx.t("forget"), "forget", False, where=break_box(ctx), help=ctx.t("forget_help"))

config = SpecConfig(k, block_size, scenario, forget)
lesson: SpecLesson | None = st.session_state.get("spec.lesson")
if lesson is None or lesson.config != config:
    steps = knobs.state("steps", 0, ui.int_in(0, MAX_STEPS), STEP_ALIASES["steps"]) if lesson is None else 0
    st.session_state["spec.lesson"] = SpecLesson.replay(config, steps, model, tokenizer)  # a link's step, first visit
    if len(st.session_state["spec.lesson"].steps) < steps:  # the link asked for more steps than the run takes
        note_past_end("steps", len(st.session_state["spec.lesson"].steps))


def lesson_now() -> SpecLesson:
    return st.session_state["spec.lesson"]


def back() -> bool:
    """Back: the state one step earlier, from the newest checkpoint (SpecLesson.without_last)."""
    now = lesson_now()
    if not now.steps:
        return False
    st.session_state["spec.lesson"] = now.without_last()
    return True


def reset() -> None:
    st.session_state["spec.lesson"] = lesson_now().restarted()


def text(tok: int) -> str:
    return shown_text(tokenizer, [tok], specials=True)


@st.fragment
def spec_view() -> None:
    """Everything a step, Back or Reset changes (st.fragment): these rerun only this part."""
    lesson = lesson_now()
    slot = ui.key_figure_slot(ctx)  # presenter mode: the bar and this step's diagram first
    bar = playback_bar(ctx, knobs, Stepper("spec", step_key="spec.step",
                                           position=len(lesson.steps), can_forward=lesson.can_step(),
                                           can_back=bool(lesson.steps), forward=lambda: lesson_now().step(),
                                           back=back), where=slot)
    bar.row.button(ctx.t("common.reset"), key="spec.reset", icon=":material/restart_alt:", on_click=reset)
    knobs.sync_url(ctx.lang, steps=len(lesson.steps))
    asking = None
    if quiz_on:
        asking = ui.quiz.show(ctx, "spec", (config, len(lesson.steps)), lambda seed: spec_question(lesson, seed),
                              "quiz.none_spec", watch=False)
    hide = asking is not None and ui.quiz.open_question("spec") is not None  # predict first: answers hidden

    # --- what the last step did -------------------------------------------------------------------------------------
    rows = lesson.rows()
    if not lesson.steps:
        st.info(ctx.t("no_step"), icon=":material/info:")
    elif not rows:
        st.info(ctx.t("prefill_step", step=len(lesson.steps)), icon=":material/info:")
    for r in rows:
        before = r.positions[0]
        after = "?" if hide else r.cached_after
        line = ctx.t("row_msg" if r.proposed else "row_plain", seq=seq_label(r.seq_id), proposed=len(r.proposed),
                     accepted=r.accepted, before=before, after=after)
        if r.discarded_slots and not hide:
            line += ctx.t("sep") + ctx.t("row_discarded", slots=", ".join(map(str, r.discarded_slots)))
        if r.blocks_freed and not hide:
            line += ctx.t("sep") + ctx.t("row_freed", blocks=", ".join(map(str, r.blocks_freed)))
        if r.ahead > 0 and not hide:
            line += ctx.t("sep") + ctx.t("row_bug", ahead=r.ahead)
        (st.warning if r.ahead > 0 and not hide else st.success)(line, icon=":material/bolt:")
    if rows:
        bar.say(ctx.t("say", step=len(lesson.steps), kept=sum(len(r.emitted) for r in rows)))

    totals = lesson.totals()
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(ctx.t("metric_rate"), f"{totals['rate']:.0%}")
    m2.metric(ctx.t("metric_per_pass"), f"{totals['per_pass']:.2f}")
    m3.metric(ctx.t("metric_proposed"), f"{totals['proposed']} ({totals['accepted']})")
    m4.metric(ctx.t("metric_passes"), totals["passes"])

    if rows and not hide:
        diagram = [StepRow(r.seq_id, [text(t) for t in r.fed], r.positions, r.slots, r.accepted,
                           text(r.emitted[-1]) if len(r.emitted) > r.accepted else None, r.blocks_taken,
                           r.blocks_freed, not config.forget_rollback) for r in rows]
        fig_col, note_col = (slot or st).columns([3, 1])
        ui.show_cells(step_html(diagram, ui.viz_labels(ctx, SpecWords, "cell")), ctx.t("step_title"), "spec.step_cells",
                      where=fig_col)
        ui.notice(ctx, ctx.t("step_notice"), where=note_col)

    per_step = [(i, sum(len(r.proposed) for r in lesson.rows(i)), sum(r.accepted for r in lesson.rows(i)))
                for i in range(len(lesson.steps)) if lesson.rows(i)]
    if per_step:
        fig_col, note_col = st.columns([3, 1])
        xs, proposed, accepted = zip(*per_step)
        ui.show_figure(acceptance_figure(xs, proposed, accepted, ctx.t("accept_title"), ctx.t("proposed_name"),
                                         ctx.t("accepted_name"), ctx.t("axis_step"), ctx.t("axis_tokens")),
                       "spec.accept", where=fig_col)
        ui.notice(ctx, ctx.t("accept_notice"), where=note_col)

    # --- the outputs and the twin check ---------------------------------------------------------------------------
    st.subheader(ctx.t("text_header"))
    outputs = lesson.outputs()
    ui.state_table([{ctx.t("col_seq"): seq_label(rid), ctx.t("col_paged"): shown_text(tokenizer, paged),
                     ctx.t("col_twin"): shown_text(tokenizer, twin)} for rid, paged, twin in outputs],
                   key="spec.text", prose=(ctx.t("col_paged"), ctx.t("col_twin")),
                   foreign=(ctx.t("col_paged"), ctx.t("col_twin")))
    where = lesson.first_divergence()
    if where is not None:
        st.error(ctx.t("twins_bad", index=where), icon=":material/bug_report:")
    elif config.forget_rollback and (stale := lesson.first_stale()) is not None and not hide:
        st.warning(ctx.t("twins_stale", step=stale[0], seq=seq_label(stale[1]), ahead=stale[2]),
                   icon=":material/warning:")
    elif config.forget_rollback:
        st.info(ctx.t("twins_wait"), icon=":material/info:")
    elif lesson.table_lengths_ok():
        st.success(ctx.t("twins_ok"), icon=":material/check_circle:")
    if not lesson.can_step():
        st.caption(ctx.t("finished"))
    ui.export_button(ctx, lesson.to_dict, "spec_trace.json", key="spec.export")


with view_slot if view_slot is not None else contextlib.nullcontext():
    spec_view()
