"""Page 7 · "what comes next", touchable (the data: lessons.beyond, the figures: viz.beyond).

    show_split_lab(ctx)     # context_len and partition-size knobs, the plan, the reduce checked, both timed live
    show_layouts(ctx)       # the article's batch in one pool, as FlashAttention and FlashInfer (NHD, HND) read it
"""

from __future__ import annotations

import streamlit as st

from lessons.beyond import CONTEXT_LENS, PARTITION_SIZES, SplitCase, layout_views, split_k_run
from viz.beyond import pool_grid_html, split_plan_html

from .widgets import session_cached, show_cells

RUNS = "fast.split_runs"  # session key: SplitCase -> SplitRun (timed once per case and session)
WORDS = ("part", "tokens", "stats", "share", "reduce", "more")


def show_split_lab(ctx) -> None:
    st.subheader(ctx.t("beyond.lab_header"))
    st.caption(ctx.t("beyond.lab_intro"))
    c1, c2 = st.columns(2)
    context_len = c1.select_slider(ctx.t("beyond.lab_context"), CONTEXT_LENS, value=4096, key="fast.split_ctx")
    size = c2.select_slider(ctx.t("beyond.lab_partition"), PARTITION_SIZES, value=512, key="fast.split_part")
    case = SplitCase(context_len=context_len, partition_size=size)
    run = session_cached(RUNS, case, lambda: split_k_run(case), max_items=16)
    st.session_state["fast.split_run"] = run  # what the tests read back
    words = {w: ctx.t(f"beyond.lab_{w}") for w in WORDS}
    parts = [(p.index, p.start, p.end) for p in run.plan]
    show_cells(split_plan_html(parts, run.weights[:, 0].tolist(), run.maxes[:, 0].tolist(), run.sums[:, 0].tolist(),
                               words, present=ctx.present),
               ctx.t("beyond.lab_plan_title", parts=len(run.plan), size=size), "fast.split_plan")
    err = f"{run.rel_err:.1e}"
    if run.ok:
        st.success(ctx.t("beyond.lab_check", err=err), icon=":material/check_circle:")
    else:
        st.error(ctx.t("beyond.lab_bad", err=err), icon=":material/error:")
    m1, m2, m3 = st.columns(3)
    m1.metric(ctx.t("beyond.lab_time_split"), f"{run.split_ms:.2f} ms")
    m2.metric(ctx.t("beyond.lab_time_whole"), f"{run.unsplit_ms:.2f} ms")
    m3.metric(ctx.t("beyond.lab_blocks"), f"{case.num_heads} → {case.num_heads * len(run.plan)}")
    st.caption(ctx.t("beyond.lab_time_note", split=f"{run.split_ms:.2f}", whole=f"{run.unsplit_ms:.2f}",
                     heads=case.num_heads, parts=len(run.plan), blocks=case.num_heads * len(run.plan)))


def show_layouts(ctx) -> None:
    st.subheader(ctx.t("beyond.layouts_header"))
    view = layout_views()
    st.markdown(ctx.t("beyond.layouts_intro", indptr=view.indptr, indices=view.indices, last=view.last_page_len))
    owner = {100 * (s + 1) + i: (s, i) for s, n in enumerate(view.context_lens) for i in range(n)}
    nhd = view.key_cache[:, :, 0, 0].long().tolist()   # read from the tensors themselves, not from the tables
    hnd = view.hnd[:, 0, :, 0].long().tolist()
    page, offset = ctx.t("beyond.layouts_page"), ctx.t("beyond.layouts_offset")
    c1, c2 = st.columns(2)
    show_cells(pool_grid_html(nhd, owner, ctx.t("beyond.layouts_nhd"), page, offset, present=ctx.present), "",
               "fast.layout_nhd", where=c1)
    show_cells(pool_grid_html(hnd, owner, ctx.t("beyond.layouts_hnd"), page, offset, present=ctx.present), "",
               "fast.layout_hnd", where=c2)
    st.session_state["fast.layout_view"] = view
    if view.agree:
        st.success(ctx.t("beyond.layouts_agree", count=sum(view.context_lens)), icon=":material/check_circle:")
    else:
        st.error(ctx.t("beyond.layouts_differ", detail=view.reads), icon=":material/error:")
