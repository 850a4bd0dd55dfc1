"""9 · Beam search: K beams as a tree on the block pool (fork, copy-on-write, prune) and the memory it saves."""

import contextlib

import streamlit as st

import ui
import ui.quiz
from lessons.beam import (BLOCK_SIZES, PAPER_SAVING, PENALTIES, PROMPTS, WIDTHS, BeamConfig, BeamLesson,
                          beam_question)
from lessons.tokens import shown_text
from ui.beam import savings_rows, shipped_model
from ui.breaks import break_box
from ui.playback import Stepper, playback_bar
from viz.beam import TreeWords, freed_overlay, savings_figure, tree_figure
from viz.colors import seq_label
from viz.sharing import RefcountWords, memory_figure, refcount_pool_figure

ctx, knobs = ui.page_header("beam", ":material/account_tree:")
quiz_on = ui.quiz.enabled(knobs)  # ?quiz=1: predict the next step, then reveal

with st.sidebar:
    prompt = knobs.select(ctx.t("prompt"), "prompt", PROMPTS[0], list(PROMPTS))
    beam_width = knobs.select(ctx.t("beam_width"), "beam_width", 4, list(WIDTHS))
    length_penalty = knobs.select(ctx.t("length_penalty"), "length_penalty", 1.0, list(PENALTIES),
                                  help=ctx.t("length_penalty_help"))
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 4, list(BLOCK_SIZES))
    ui.device_badge(ctx, "float32")

view_slot = ui.key_figure_slot(ctx)  # presenter mode: the stepping view first, Break it under it
skip_cow = knobs.toggle(ctx.t("skip_cow"), "skip_cow", False, where=break_box(ctx),  # the copy-on-write left out
                        help=ctx.t("skip_cow_help"))

model, tokenizer = shipped_model(ctx)  # the recall prompts need the shipped byte model's SEP
config = BeamConfig(prompt, beam_width, length_penalty, block_size, skip_cow)
lesson: BeamLesson = ui.session_cached("beam.lessons", config, lambda: BeamLesson(config, model, tokenizer), 6)
last = len(lesson.traces)


def move(by: int, end: int = last) -> bool:
    """The shown step one up or down (a callback: it runs before the next run draws the page)."""
    now = st.session_state["beam.step"]
    st.session_state["beam.step"] = max(0, min(end, now + by))
    return st.session_state["beam.step"] != now


@st.fragment
def beam_view() -> None:
    """Everything a step, Back or Reset changes (st.fragment): a click reruns only this part, not
    the sidebar or the measured comparison below."""
    step = knobs.step("step", last)  # ?step=N (?steps=N too), clamped to the run's end with a note
    slot = ui.key_figure_slot(ctx)  # presenter mode: the bar, the pool and the tree first
    bar = playback_bar(ctx, knobs, Stepper(
        "beam", step_key="beam.next", position=step, total=last,
        can_forward=step < last, can_back=step > 0, forward=lambda: move(1), back=lambda: move(-1)),
        where=slot)
    bar.row.button(ctx.t("common.reset"), key="beam.reset", icon=":material/restart_alt:", disabled=step == 0,
                   on_click=lambda: st.session_state.update({"beam.step": 0}))  # back to step 0, as on pages 4-6
    if quiz_on:  # predict, then reveal: how many blocks does the next step copy, or free?
        ui.quiz.show(ctx, "beam", (config, step), lambda seed: beam_question(lesson, step, seed), "quiz.none_beam")
    knobs.sync_url(ctx.lang)

    # --- what this step did -------------------------------------------------------------------------------------------
    view = lesson.view(step)
    trace = lesson.traces[step - 1] if step else None
    label = seq_label
    if trace is None:
        said = ctx.t("at_start")
        bar.tell(said, st.info, icon=":material/flag:")
    elif trace.phase == "prefill":
        fed = trace.seqs[0]
        said = ctx.t("said_prefill", step=step, tokens=len(fed.tokens_in),
                     blocks=trace.blocks_allocated.get(fed.seq_id, []))
        bar.tell(said, st.success, icon=":material/input:")
    else:
        said = ctx.t("said_decode", step=step, beams=len(trace.seqs))
        bar.tell(said, st.success, icon=":material/edit_note:")
    if trace is not None:
        if trace.cow_skipped:  # one line per step, whatever the width: the pool stays near the bar
            st.error(ctx.t("skipped_msg", seqs=", ".join(label(s) for s, _ in trace.cow_skipped),
                           blocks=", ".join(str(b) for b in dict.fromkeys(b for _, b in trace.cow_skipped))),
                     icon=":material/bug_report:")
        if trace.copies:
            st.warning(ctx.t("cow_msg", copies=", ".join(f"{src} → {dst}" for src, dst in trace.copies)),
                       icon=":material/content_copy:")
        for parent, children in trace.forked.items():
            st.info(ctx.t("fork_msg", seq=label(parent), times=len(children) + 1,
                          children=", ".join(label(c) for c in children), blocks=len(view.tables.get(parent, ()))),
                    icon=":material/call_split:")
        for seq in trace.pruned:
            freed = trace.blocks_freed.get(seq, [])
            st.info(ctx.t("prune_msg", seq=label(seq), blocks=freed) if freed else ctx.t("prune_none", seq=label(seq)),
                    icon=":material/content_cut:")
        if trace.hypotheses:
            st.success(ctx.t("hyp_msg", hyps=", ".join(f"`{shown_text(tokenizer, h['token_ids'], specials=True)}` "
                                                       f"({h['score']:.3f})" for h in trace.hypotheses)),
                       icon=":material/star:")
        if step == last:
            st.success(ctx.t("end_msg"), icon=":material/done_all:")
    same, first_bad = lesson.twin_check()
    if first_bad is not None and step >= first_bad:
        st.error(ctx.t("twin_bad", step=first_bad), icon=":material/bug_report:")  # the break-it's report

    # --- the pool and the tree ----------------------------------------------------------------------------------------
    cols = min(view.num_blocks, 16)
    pool = refcount_pool_figure(view.num_blocks, view.block_size, view.tables, view.cached, view.ref_counts, (),
                                view.copies, title=ctx.t("pool_title", free=view.num_free_blocks,
                                                         num_blocks=view.num_blocks), cols=cols,
                                token_text=lesson.token_texts(step),
                                words=ui.viz_labels(ctx, RefcountWords, "sharing.ref"))
    pool = freed_overlay(pool, view.freed, cols, ctx.t("freed_hover"))  # a cross on each block freed this step
    fig_col, note_col = (slot or st).columns([3, 1])
    ui.show_figure(pool, "beam.pool", where=fig_col)
    ui.notice(ctx, ctx.t("pool_notice"), where=note_col)

    nodes, edges = lesson.tree(step)
    fig_col, note_col = (slot or st).columns([3, 1])
    ui.show_figure(tree_figure(nodes, edges, ctx.t("tree_title"), ui.viz_labels(ctx, TreeWords, "tree")), "beam.tree",
                   where=fig_col)
    ui.notice(ctx, ctx.t("tree_notice"), where=note_col)

    steps, shared, unshared = lesson.memory(step)
    fig_col, note_col = st.columns([3, 1])
    ui.show_figure(memory_figure(steps or [0], shared or [0], unshared or [0], view.num_blocks, ctx.t("memory_title"),
                                 held_name=ctx.t("held_name"), without_name=ctx.t("without_name"),
                                 x_title=ctx.t("axis_step"), y_title=ctx.t("axis_blocks")),
                   "beam.memory", where=fig_col)
    saving = 100 * (1 - sum(shared) / sum(unshared)) if sum(unshared) else 0.0
    ui.notice(ctx, ctx.t("memory_notice", shared=sum(shared), unshared=sum(unshared), saving=f"{saving:.1f}"),
              where=note_col)

    # --- the K beams, and the twin ------------------------------------------------------------------------------------
    st.subheader(ctx.t("beams_header"))
    if step < last:
        st.caption(ctx.t("not_yet"))
    else:
        rows = [{ctx.t("col_rank"): i + 1, ctx.t("col_text"): shown_text(tokenizer, b.token_ids, specials=True),
                 ctx.t("col_score"): f"{b.score:.4f}",
                 ctx.t("col_twin"): f"{shown_text(tokenizer, g.token_ids, specials=True)} ({g.score:.4f})"}
                for i, (b, g) in enumerate(zip(lesson.result.beams, lesson.twin.beams))]
        ui.state_table(rows, key="beam.beams", prose=(ctx.t("col_text"), ctx.t("col_twin")),
                       foreign=(ctx.t("col_text"), ctx.t("col_twin")))
        if same:
            st.success(ctx.t("twin_ok"), icon=":material/check_circle:")


with view_slot if view_slot is not None else contextlib.nullcontext():
    beam_view()

# --- measured: the paper's §4.4 comparison ----------------------------------------------------------------------------
st.subheader(ctx.t("savings_header"))
rows = savings_rows(model, tokenizer)  # measured once per process: the shipped model and the search are fixed
fig_col, note_col = st.columns([3, 1])
ui.show_figure(savings_figure(rows, PAPER_SAVING, ctx.t("savings_title"), paper_name=ctx.t("paper_name"),
                              y_title=ctx.t("savings_y")), "beam.savings", where=fig_col)
ui.notice(ctx, ctx.t("savings_notice"), where=note_col)


def export() -> dict:
    """The traces to download, made only when the button is pressed."""
    return {"config": config.__dict__, "steps": [t.to_dict() for t in lesson.traces],
            "beams": [{"token_ids": b.token_ids, "score": b.score} for b in lesson.result.beams],
            "memory_savings": rows}


ui.export_button(ctx, export, "beam_trace.json", key="beam.export")
