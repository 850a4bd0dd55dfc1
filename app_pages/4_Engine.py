"""4 · Engine: the mini vLLM on the shipped model, one step at a time, with its contiguous twin alongside."""

import streamlit as st

import ui
from ui.vllm_side import show_vllm_side
import ui.quiz
from lessons.quiz import next_step_question
from lessons.tokens import token_label
from ui.engine_actions import (CONFIG_KNOBS, announce_step, config_sidebar, engine_controls, engine_lesson,
                               engine_model, keep_row, request_numbers, show_messages, status_text)
from ui.chain_live import show_chain, show_state_rule
from ui.engine_fault import fault_picker, show_fault_rule, show_fault_verdict
from ui.widgets import show_cells
from lessons.engine import table_changes
from lessons.engine_requests import (ENGINE_SCENARIOS, MAX_PROMPT_CHARS, PROMPT_PRESETS, TASKS, DemoConfig,
                                   encode_requests)
from viz.colors import seq_label
from viz.cells import QueueWords, SlotWords, TwinWords, queues_html, slot_mapping_html, twin_diff_html
from viz.engine import RECENT_STEPS, cache_rule_html
from viz.pool import PoolWords, pool_html

QUEUES_PX = 360  # the queues' width beside their note (three lanes of a few squares each; wider wraps)

ctx = ui.setup_page("engine", icon=":material/settings:")
knobs = ui.Knobs("engine")
quiz_on = ui.quiz.enabled(knobs)  # ?quiz=1: predict, then reveal
st.title(ctx.t("title"))
ui.page_intro(ctx)


model, tokenizer = engine_model(ctx, knobs)  # the sidebar's model picker (ui.model_picker)

with st.sidebar:
    st.header(ctx.t("common.settings"))
    config = config_sidebar(ctx, knobs, ENGINE_SCENARIOS, DemoConfig(), dict.fromkeys(CONFIG_KNOBS),
                            lambda n: ctx.t(f"scenario_{n}"))
    config = fault_picker(ctx, knobs, config)  # break a module: a bug lab fault in the paged twin
    ui.device_badge(ctx, "float32")


def use_preset() -> None:
    task, text = PROMPT_PRESETS[st.session_state["engine.preset"]]
    st.session_state["engine.new_text"], st.session_state["engine.new_task"] = text, task


def add_request_form() -> None:
    """The "add a request" form: outside the step fragment (nothing in it changes with a step, so a step does not
    redraw it); its Add button reruns the whole page, fragment included."""
    demo = st.session_state.get("engine.lesson")
    with st.expander(ctx.t("add_header"), expanded=demo is not None and not demo.all_specs()):
        c1, c2, c3 = st.columns([1.2, 3, 1.2])
        c1.selectbox(ctx.t("preset"), list(PROMPT_PRESETS), key="engine.preset", on_change=use_preset,
                     format_func=lambda n: ctx.t(f"preset_{n}"))
        st.session_state.setdefault("engine.new_task", PROMPT_PRESETS["recall_fox"][0])
        st.session_state.setdefault("engine.new_text", PROMPT_PRESETS["recall_fox"][1])
        c2.text_input(ctx.t("prompt"), max_chars=MAX_PROMPT_CHARS, key="engine.new_text")
        c3.radio(ctx.t("task"), TASKS, key="engine.new_task", format_func=lambda k: ctx.t(f"task_{k}"), horizontal=True)
        request_numbers(ctx, "engine", 64, 0.0)
        st.caption(ctx.t("task_help"))


def show_pool(demo, trace) -> None:
    """The pool after the step: this step's writes outlined (a decode's) or thinly (a prefill's whole prompts)."""
    view = demo.view
    written = trace.slot_mapping if trace else []
    decode = trace is not None and trace.phase == "decode"  # a prefill writes whole prompts: a thin outline reads better
    pool = pool_html(view.num_blocks, view.block_size, view.tables, view.cached_counts,
                     highlight=written if decode else [], read=[] if decode else written, max_width=680,
                     token_text=demo.token_texts(), words=ui.viz_labels(ctx, PoolWords, "common.pool"))
    fig_col, note_col = st.columns([3, 1])
    show_cells(pool, ctx.t("pool_title", free=view.num_free_blocks, num_blocks=view.num_blocks), "engine.pool",
               where=fig_col)
    ui.notice(ctx, ctx.t("pool_notice"), where=note_col)


def show_addresses(trace, block_size: int) -> None:
    """This step's slot_mapping (one cell per fed token) and each block_table before → after the step."""
    entries = [(s.seq_id, s.positions, s.slots) for s in trace.seqs if s.slots]
    fig_col, note_col = st.columns([3, 1])
    slot_words = ui.viz_labels(ctx, SlotWords, "engine.slots")
    show_cells(slot_mapping_html(entries, block_size, words=slot_words),
               ctx.t("slots_title", phase=trace.phase), "engine.slots", where=fig_col)
    ui.notice(ctx, ctx.t("slots_notice"), where=note_col)
    changes = table_changes(trace.block_tables_before, trace.block_tables_after)
    bold = lambda table, new: "[" + ", ".join(f"**{b}**" if b in new else str(b) for b in table) + "]"  # noqa: E731
    lines = [f"| {ctx.t('col_seq')} | {ctx.t('col_before')} | {ctx.t('col_after')} |", "|---|---|---|"]
    lines += [f"| {seq_label(sid)} | {before} | {bold(after, new) if after else '—'} |"
              for sid, before, after, new in changes]
    table_col, note_col = st.columns([3, 1])
    table_col.markdown(f"**{ctx.t('tables_title')}**")
    table_col.markdown("\n".join(lines) if changes else ctx.t("no_tables"))
    ui.notice(ctx, ctx.t("tables_notice"), where=note_col)


def show_text(demo, trace) -> None:
    """Each request's text as it grows (the newest token's piece beside it), and cached_token_count against its
    rule over the newest steps."""
    newest = ({s.seq_id: token_label(tokenizer, s.token_out) for s in trace.seqs if s.token_out is not None}
              if trace else {})  # the token's own text piece (␣ a space, ⟨0xNN⟩ a byte): lessons.tokens
    rows = [{ctx.t("col_seq"): seq_label(r.seq_id), ctx.t("col_status"): status_text(ctx, r.status, r.finish_reason),
             "cached_token_count": r.cached_token_count, ctx.t("col_generated"): r.generated_len,
             ctx.t("col_preemptions"): r.preemptions,
             ctx.t("col_newest"): newest.get(r.seq_id, ""),
             ctx.t("col_prompt"): r.prompt, ctx.t("col_output"): r.text} for r in demo.rows()]
    if rows:
        ui.state_table(rows, key="engine.text", prose=(ctx.t("col_prompt"), ctx.t("col_output")),
                       foreign=(ctx.t("col_newest"), ctx.t("col_prompt"), ctx.t("col_output")))
    else:
        st.info(ctx.t("no_requests"))
    series = demo.cache_series(last=RECENT_STEPS)  # the newest steps only: the chart costs the same at step 600
    if series:
        fig_col, note_col = st.columns([3, 1])
        cut = len(demo.steps) > RECENT_STEPS
        title = ctx.t("cache_title") + (ctx.t("cache_recent", shown=RECENT_STEPS, steps=len(demo.steps)) if cut else "")
        show_cells(cache_rule_html(series, rule_name=ctx.t("rule_name"), x_title=ctx.t("axis_step"),
                                  y_title=ctx.t("axis_tokens"), tip=ctx.t("rule_tip"),
                                  first_step=len(demo.steps) - RECENT_STEPS + 1 if cut else 0),
                   title, "engine.cache", where=fig_col)
        ui.notice(ctx, ctx.t("cache_notice"), where=note_col)


@st.fragment
def engine_view() -> None:
    """Everything a step, Back, Run, Reset or a new request changes (st.fragment): these rerun only this part,
    not the page setup, the sidebar and the model loading above it. It reads the lesson afresh from session_state."""
    demo = engine_lesson(ctx, "engine", config, model, tokenizer, list(ENGINE_SCENARIOS["three"].requests))
    slot = ui.key_figure_slot(ctx)  # presenter mode: the bar and the queues first, the step's messages under them
    bar = engine_controls(ctx, knobs, demo, where=slot)

    knobs.sync_url(ctx.lang, reqs=encode_requests(demo.all_specs()), steps=len(demo.steps))
    show_messages(ctx, demo)
    show_fault_verdict(ctx, demo)  # with a fault on: what broke, where the twins first part
    if quiz_on:  # predict, then reveal: a cached_token_count after the next step, or a prompt's prefix-cache hits
        ui.quiz.show(ctx, "engine", (config, len(demo.steps), len(demo.all_specs())),
                     lambda seed: next_step_question(demo, seed), "quiz.none_engine")

    # --- the scheduler's decision -------------------------------------------------------------------------------------
    trace = announce_step(ctx, bar, demo)
    waiting, running, finished = demo.queues()
    if trace is not None:
        m1, m2, m3, m4 = st.columns(4)
        m1.metric(ctx.t("budget_tokens"), f"{len(trace.slot_mapping)} / {config.max_num_batched_tokens}",
                  help="max_num_batched_tokens")
        m2.metric(ctx.t("budget_seqs"), f"{len(trace.scheduled)} / {config.max_num_seqs}", help="max_num_seqs")
        m3.metric(ctx.t("budget_blocks"), f"{trace.num_free_blocks} / {trace.num_blocks}", help="num_blocks")
        m4.metric(ctx.t("step_time"), f"{trace.elapsed_ms:.1f} ms")
        labels = lambda ids: ", ".join(seq_label(s) for s in ids)  # noqa: E731
        if trace.preempted:
            st.warning(ctx.t("preempted_msg", seqs=labels(trace.preempted)), icon=":material/recycling:")
        if trace.finished:
            st.success(ctx.t("finished_msg", seqs=labels(trace.finished)), icon=":material/flag:")
    if demo.pending:
        st.caption(ctx.t("pending", count=len(demo.pending), steps=", ".join(str(s.at_step) for s in demo.pending)))
    if not demo.can_step() and demo.steps:
        st.caption(ctx.t("all_done"))

    if ctx.present:  # the figure above its note, full width (ui.present)
        fig_col, note_col = slot.columns([3, 1])
    else:  # the lanes are narrow: the note beside them, under them only where the page is too narrow for both
        row = st.container(horizontal=True, key="engine.queues_row")
        fig_col = row.container(width=QUEUES_PX)
        note_col = row.container(width="stretch", key="engine.queues_beside_note")
    show_cells(queues_html(waiting, running, finished, trace.preempted if trace else (),
                           trace.scheduled if trace else (),
                           words=ui.viz_labels(ctx, QueueWords, "lane")),
               ctx.t("queues_title"), "engine.queues", where=fig_col)
    ui.notice(ctx, ctx.t("queues_notice"), where=note_col)

    # --- the pool after this step (presenter mode: under the state rule and the twins' verdict) ----------------------
    view = demo.view
    pool_box = st.container() if not ctx.present else None

    if demo.steps:  # before the first step there is no rule row and nothing to compare: the page stays short
        # --- the state rule, one sequence step by step ------------------------------------------------------------------
        show_state_rule(ctx, demo, tokenizer)
        show_fault_rule(ctx, demo)  # with a fault on: the rule's counts next to what the broken link used

        # --- the twins: the verdict open; why they agree and the per-step differences folded -----------------------
        st.subheader(ctx.t("twins_header"))
        worst, agree = demo.twin_summary()
        verdict, tolerance = agree, demo.twin_tolerance()
        st.container(key="engine.twins_verdict").markdown(
            ctx.t("twins_ok" if verdict else "twins_bad", worst=f"{worst:.2e}", tol=f"{tolerance:.0e}"))
        if demo.schedules_differ():
            st.caption(ctx.t("twins_schedules_differ"))
        first = max(1, len(demo.steps) - RECENT_STEPS + 1)  # the newest steps only, as the cache chart
        shown = demo.steps[first - 1:]
        title = ctx.t("twins_title") + (ctx.t("cache_recent", shown=RECENT_STEPS, steps=len(demo.steps))
                                        if first > 1 else "")
        with st.expander(ctx.t("twins_fold")):
            fig_col, note_col = st.columns([3, 1])
            show_cells(twin_diff_html(list(range(first, len(demo.steps) + 1)), [s.max_diff for s in shown],
                                      [all(s.same_tokens.values()) for s in shown], tolerance,
                                      x_title=ctx.t("axis_step"), words=ui.viz_labels(ctx, TwinWords, "twin"),
                                      first_step=first), title, "engine.twins", where=fig_col)
            ui.notice(ctx, ctx.t("twins_notice", tol=f"{tolerance:.0e}"), where=note_col)
    with pool_box if pool_box is not None else st.container():
        show_pool(demo, trace)

    # --- reference, folded: the seven modules, this step's addresses, the text, vLLM's own manager ------------------
    with st.expander(ctx.t("reference_fold"), icon=":material/menu_book:"):
        show_chain(ctx, demo)
        if trace is not None and trace.seqs:
            st.subheader(ctx.t("addresses_fold", phase=trace.phase))
            show_addresses(trace, view.block_size)
        st.subheader(ctx.t("text_header"))
        show_text(demo, trace)
        show_vllm_side(ctx, demo, seq_label, "engine")  # vLLM's own KVCacheManager, same steps
    keep_row(ctx, demo, "engine_trace.json", "engine")  # Export and the share hint


form_slot = st.container()  # above the step fragment: drawn after it, once the lesson of this run exists
engine_view()
with form_slot:
    add_request_form()
