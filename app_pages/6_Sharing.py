"""6 · Sharing: prefix caching and parallel sampling share physical blocks through reference counts."""

import streamlit as st

import ui
from ui.vllm_side import show_vllm_side
from ui.engine_actions import (announce_step, config_sidebar, engine_controls, engine_lesson, engine_model,
                               keep_row, request_numbers, show_messages, status_text)
from lessons.engine_requests import MAX_PROMPT_CHARS, SHARING_SCENARIOS, TASKS, encode_requests
from lessons.tokens import shown_text
from viz.colors import seq_label
from ui.widgets import show_cells, viz_labels
from viz.sharing import HitsLabels, RefcountWords, hits_html, memory_figure, refcount_pool_figure

ctx = ui.setup_page("sharing", icon=":material/call_split:")
knobs = ui.Knobs("sharing")
st.title(ctx.t("title"))
ui.page_intro(ctx)


model, tokenizer = engine_model(ctx, knobs)  # the sidebar's model picker (ui.model_picker)


DEFAULT = SHARING_SCENARIOS["prefix"]
with st.sidebar:
    st.header(ctx.t("common.settings"))
    config = config_sidebar(ctx, knobs, SHARING_SCENARIOS, DEFAULT.config,
                            {"block_size": (1, 2, 4, 8, 16), "num_blocks": (8, 128)}, lambda n: ctx.t(f"scenario_{n}"))
    st.caption(ctx.t("caching_on"))
    ui.device_badge(ctx, "float32")


def add_request_form() -> None:
    """The "add a request" form: outside the step fragment (nothing in it changes with a step, so a step does not
    redraw it); its Add button reruns the whole page, fragment included."""
    with st.expander(ctx.t("engine.add_header")):
        c1, c2 = st.columns([4, 1.2])
        st.session_state.setdefault("sharing.new_text", SHARING_SCENARIOS["prefix"].requests[0].prompt)
        c1.text_input(ctx.t("engine.prompt"), max_chars=MAX_PROMPT_CHARS, key="sharing.new_text")
        c2.radio(ctx.t("engine.task"), TASKS, key="sharing.new_task", horizontal=True,
                 format_func=lambda k: ctx.t(f"engine.task_{k}"))
        request_numbers(ctx, "sharing", 32, 0.8, with_n=True,
                        label=lambda seq_id: seq_label(st.session_state["sharing.lesson"].display_ids()[seq_id]))


@st.fragment
def sharing_view() -> None:
    """Everything a step, Back, Run, Reset or a new request changes (st.fragment): these rerun only this part,
    not the page setup, the sidebar and the model loading above it. It reads the lesson afresh from session_state."""
    demo = engine_lesson(ctx, "sharing", config, model, tokenizer, list(DEFAULT.requests))
    bar = engine_controls(ctx, knobs, demo)

    knobs.sync_url(ctx.lang, reqs=encode_requests(demo.all_specs()), steps=len(demo.steps))
    shown = demo.display_ids()  # seq_id -> the id its label and colour come from: fixed for the sequence's whole life
    label = lambda seq_id: seq_label(shown[seq_id])  # noqa: E731
    show_messages(ctx, demo, label)

    # --- what this step shared ----------------------------------------------------------------------------------------
    trace = announce_step(ctx, bar, demo)
    view = demo.view
    if trace is not None:
        for a in (a for a in demo.allocations if a.step == len(demo.steps)):
            hits = [b for b, h in zip(a.table, a.hits) if h]
            key = "hits_msg" if hits else "miss_msg"
            st.success(ctx.t(key, seq=label(a.seq_id), hits=len(hits), blocks=len(a.table),
                             hit_blocks=hits, computed=len(a.table) - len(hits)), icon=":material/target:" if hits else ":material/calculate:")
        for parent, children in trace.forked.items():
            st.info(ctx.t("fork_msg", seq=label(parent), children=", ".join(label(c) for c in children),
                          blocks=len(view.tables.get(parent, ())), ref=len(children) + 1), icon=":material/call_split:")
        owner_of = {b: s for s, blocks in trace.blocks_allocated.items() for b in blocks}
        for src, dst in trace.copies:
            st.warning(ctx.t("cow_msg", src=src, dst=dst, seq=label(owner_of[dst]) if dst in owner_of else "?"),
                       icon=":material/content_copy:")

    m1, m2, m3, m4 = st.columns(4)
    m1.metric(ctx.t("metric_held"), view.held_blocks)
    m2.metric(ctx.t("metric_tables"), view.table_blocks)
    m3.metric(ctx.t("metric_saved"), view.shared_saved)
    m4.metric(ctx.t("metric_shared"), sum(1 for c in view.ref_counts if c > 1))

    tables = {shown[sid]: table for sid, table in view.tables.items()}
    lens = {shown[sid]: count for sid, count in view.cached_counts.items()}
    pool = refcount_pool_figure(view.num_blocks, view.block_size, tables, lens, list(view.ref_counts),
                                list(view.cached_blocks), trace.copies if trace else (),
                                token_text={shown[sid]: texts for sid, texts in demo.token_texts().items()},
                                title=ctx.t("pool_title", free=view.num_free_blocks, num_blocks=view.num_blocks),
                                words=viz_labels(ctx, RefcountWords, "ref"))
    fig_col, note_col = st.columns([3, 1])
    ui.show_figure(pool, "sharing.pool", where=fig_col)
    ui.notice(ctx, ctx.t("pool_notice"), where=note_col)

    if demo.allocations:
        rows = [(a.step, shown[a.seq_id], a.table, a.hits) for a in reversed(demo.allocations)][:6]
        fig_col, note_col = st.columns([3, 1])
        show_cells(hits_html(rows, hit_name=ctx.t("hit"), miss_name=ctx.t("computed"),
                             labels=viz_labels(ctx, HitsLabels, "hits")), ctx.t("hits_title"),
                   "sharing.hits", where=fig_col)
        ui.notice(ctx, ctx.t("hits_notice"), where=note_col)

    # --- parallel samples ---------------------------------------------------------------------------------------------
    groups = {rid: [view.seqs[sid] for sid in ids] for rid, ids in view.groups.items() if len(ids) > 1}
    for rid, group in groups.items():
        st.subheader(ctx.t("samples_header", seq=label(rid), n=len(group)))
        for col, seq in zip(st.columns(len(group)), group):
            with col.container(border=True):
                st.markdown(ctx.t("sample_title", seq=label(seq.seq_id), i=seq.sample_index))
                st.code(shown_text(tokenizer, list(seq.generated_token_ids)) or " ", language=None, wrap_lines=True)
                st.caption(ctx.t("sample_caption", table=list(seq.block_table) or "—",
                                 status=status_text(ctx, seq.status, seq.finish_reason)))

    fig_col, note_col = st.columns([3, 1])
    hist = demo.history
    ui.show_figure(memory_figure([h.step for h in hist], [h.held_blocks for h in hist], [h.table_blocks for h in hist],
                                 view.num_blocks, ctx.t("memory_title"), held_name=ctx.t("held_name"),
                                 without_name=ctx.t("without_name"), x_title=ctx.t("engine.axis_step"),
                                 y_title=ctx.t("axis_blocks")), "sharing.memory", where=fig_col)
    ui.notice(ctx, ctx.t("memory_notice"), where=note_col)

    # --- every sequence and the twin check ----------------------------------------------------------------------------
    st.subheader(ctx.t("engine.text_header"))
    rows = [{ctx.t("engine.col_seq"): label(r.seq_id), ctx.t("col_request"): label(r.request_id),
             ctx.t("engine.col_status"): status_text(ctx, r.status, r.finish_reason),
             "cached_token_count": r.cached_token_count, ctx.t("engine.col_generated"): r.generated_len,
             ctx.t("engine.col_prompt"): r.prompt, ctx.t("engine.col_output"): r.text}
            for r in demo.rows()]
    if rows:
        ui.state_table(rows, key="sharing.text", prose=(ctx.t("engine.col_prompt"), ctx.t("engine.col_output")),
                       foreign=(ctx.t("engine.col_newest"), ctx.t("engine.col_prompt"), ctx.t("engine.col_output")))
    worst, agree = demo.twin_summary()
    if demo.steps:
        ok, tolerance = agree, demo.twin_tolerance()
        st.markdown(ctx.t("twins_line") + " " + ctx.t("engine.twins_ok" if ok else "engine.twins_bad",
                                                       worst=f"{worst:.2e}", tol=f"{tolerance:.0e}"))
        if demo.schedules_differ():
            st.caption(ctx.t("engine.twins_schedules_differ"))

    show_vllm_side(ctx, demo, label, "sharing")  # vLLM's own KVCacheManager, same steps
    keep_row(ctx, demo, "sharing_trace.json", "sharing")  # Export and the share hint, as on page 4


form_slot = st.container()  # above the step fragment: drawn after it, as on page 4
sharing_view()
with form_slot:
    add_request_form()
