"""11 · Sliding window: blocks behind the window are freed while the sequence runs; holes at the front of the table."""

import dataclasses

import streamlit as st

import ui
import ui.quiz
from lessons.tokens import shown_text, token_label
from lessons.window import (BLOCK_SIZES, MAX_STEPS, NUM_BLOCKS, PROMPTS, WINDOWS, WindowConfig, freed_question,
                            run_window, step_words)
from paged.chapters.window import HOLE
from ui.breaks import break_box
from ui.engine_actions import engine_model
from ui.playback import Stepper, playback_bar
from ui.widgets import session_cached, show_cells, viz_labels
from viz.sharing import memory_figure
from viz.window import WindowWords, window_table_html

ctx, knobs = ui.page_header("window", ":material/view_week:")
quiz_on = ui.quiz.enabled(knobs)  # ?quiz=1: which blocks does the next step free?

with st.sidebar:
    window = knobs.select(ctx.t("window"), "window", 6, WINDOWS, help=ctx.t("window_help"))
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 4, BLOCK_SIZES)
    prompt = knobs.radio(ctx.t("prompt"), "prompt", "recall", list(PROMPTS), format_func=lambda k: ctx.t(f"prompt_{k}"))
    ui.device_badge(ctx, "float32")

model, tokenizer = engine_model(ctx)  # the shipped model (a window is put on its architecture: with_window)
slot = ui.key_figure_slot(ctx)  # presenter mode: the bar and the block tables, then Break it
free_early = knobs.toggle(ctx.t("break_label"), "free_early", False, where=break_box(ctx), help=ctx.t("break_help"))
config = WindowConfig(window, block_size, prompt, free_early)
run = session_cached("window.runs", config, lambda: run_window(config, model, tokenizer), max_items=8)
step = knobs.step("step", run.num_steps, MAX_STEPS)  # ?step=N (?steps=N too), clamped with a note


def move(delta: int) -> bool:
    """Step (+1) or Back (-1) over the recorded frames; False at either end."""
    now, kept = st.session_state[knobs.key("step")], st.session_state["window.runs"].get(config)
    if kept is None or not 0 <= now + delta <= kept.num_steps:
        return False
    st.session_state[knobs.key("step")] = now + delta
    return True


bar = playback_bar(ctx, knobs, Stepper("window", step_key="window.step_btn",
                                       position=step, total=run.num_steps, can_forward=step < run.num_steps,
                                       can_back=step > 0, forward=lambda: move(1),
                                       back=lambda: move(-1)), where=slot)
bar.row.button(ctx.t("common.reset"), key="window.reset", icon=":material/restart_alt:", disabled=step == 0,
               on_click=lambda: st.session_state.update({knobs.key("step"): 0}))  # back to step 0, as on pages 4-6
if quiz_on:
    ui.quiz.show(ctx, "window", (config, step), lambda seed: freed_question(run, step, seed), "window.quiz_none")
knobs.sync_url(ctx.lang)

# --- what this step did -----------------------------------------------------------------------------------------------
frame, before = run.frames[step], run.frames[max(0, step - 1)]
said = " ".join(ctx.t(key, **values) for key, values in step_words(run, step))
bar.tell(said, st.info, icon=":material/view_week:")

m1, m2, m3, m4 = st.columns(4)
m1.metric(ctx.t("metric_held"), frame.held)
m2.metric(ctx.t("metric_full"), frame.held_full)
m3.metric(ctx.t("metric_bound"), run.bound)
m4.metric(ctx.t("metric_free"), frame.num_free_blocks)

# --- the block tables ---------------------------------------------------------------------------------------------
labels_a = [token_label(tokenizer, t) for t in frame.token_ids]  # whole: the cell shortens them
labels_b = [token_label(tokenizer, t) for t in frame.neighbour_ids]
rows = [(0, frame.table, labels_a, frame.cached, frame.first_read if 0 < step < run.num_steps else None,
         before.tables.get(0, []))]
if frame.tables.get(1):
    rows.append((1, frame.tables[1], labels_b, len(frame.neighbour_ids) - 1, None, before.tables.get(1, [])))
fig_col, note_col = (slot or st).columns([3, 1])
if frame.tables:
    show_cells(window_table_html(rows, block_size, viz_labels(ctx, WindowWords, "w"), big=ctx.present),
               ctx.t("table_title", step=step), "window.tables", where=fig_col)
ui.notice(ctx, ctx.t("table_notice"), where=note_col)
note_col.caption(ctx.t("vllm_note"))

# --- memory: with and without the window ------------------------------------------------------------------------------
steps = [f.step for f in run.frames[:step + 1]]
fig_col, note_col = st.columns([3, 1])
ui.show_figure(memory_figure(steps, [f.held for f in run.frames[:step + 1]],
                             [f.held_full for f in run.frames[:step + 1]], NUM_BLOCKS, ctx.t("memory_title"),
                             held_name=ctx.t("held_name"), without_name=ctx.t("without_name"),
                             x_title=ctx.t("engine.axis_step"), y_title=ctx.t("axis_blocks")),
               "window.memory", where=fig_col)
ui.notice(ctx, ctx.t("memory_notice"), where=note_col)

# --- A's text: the twins, and full attention ----------------------------------------------------------------------
st.subheader(ctx.t("text_header"))
cut = run.prompt_len
for key, ids in (("paged_text", frame.token_ids), ("twin_text", frame.twin_ids),
                 ("full_text", run.full_ids[:len(frame.token_ids)])):
    st.markdown(f"**{ctx.t(key)}**")
    st.code(shown_text(tokenizer, ids[cut:]) or " ", language=None, wrap_lines=True)
drift = run.drift_step
if drift is not None and drift <= step:
    st.error(ctx.t("twins_drift", step=drift), icon=":material/bug_report:")
elif free_early and step == run.num_steps:
    st.warning(ctx.t("break_quiet"), icon=":material/help:")
else:
    st.success(ctx.t("twins_agree"), icon=":material/check_circle:")
ui.export_button(ctx, lambda: {"config": config.__dict__, "prompt_len": run.prompt_len, "full_ids": run.full_ids,
                               "frames": [dataclasses.asdict(f) for f in run.frames]},
                 "window_trace.json", key="window.export")  # as on pages 4-6, 9 and 12
