"""Page 7 · Correct → fast, last section: what comes next. How vLLM, FlashAttention and FlashInfer lay out and
address a paged cache next to ours, split-K, and the outside kernels as extra rungs (benchmarks.external).

    show_what_comes_next(ctx, case, cuda)   # case: the ladder's KernelCase (None when the knobs are invalid)
"""

from __future__ import annotations

import streamlit as st

from lessons.address import SEED_BATCH, SEED_BLOCK_SIZE
from paged.addressing import pad_block_tables
from benchmarks.external import EXTERNAL_RUNGS, ExternalRung, flashinfer_page_table, run_external

from .beyond_lab import show_layouts, show_split_lab

LAYOUT_ROWS = ("ours", "vllm_v1", "vllm_fa", "fa", "fi")
OURS_LAYOUT = "key_cache, value_cache [num_blocks, block_size, num_kv_heads, head_dim]"
RUNS = "fast.external"  # session key: KernelCase -> list[ExternalRung]


def layout_table(ctx) -> str:
    """The markdown table: who, K/V layout, how the block table is given, page size."""
    t = ctx.t
    lines = [f"| {t('beyond.col_who')} | {t('beyond.col_layout')} | {t('beyond.col_table')} | {t('beyond.col_page')} |",
             "|---|---|---|---|"]
    for row in LAYOUT_ROWS:
        layout = OURS_LAYOUT if row == "ours" else t(f"beyond.row_{row}_layout")
        lines.append(f"| {t(f'beyond.row_{row}_who')} | {layout} | {t(f'beyond.row_{row}_table')} | "
                     f"{t(f'beyond.row_{row}_page')} |")
    return "\n".join(lines)


def rung_status(ctx, rung: ExternalRung | None) -> str:
    if rung is None:
        return ctx.t("beyond.not_run")
    if not rung.ran:
        return ctx.t(f"beyond.skip_{rung.code}", **rung.detail)
    fmt = lambda v, spec: "–" if v is None else format(v, spec)  # noqa: E731
    return ctx.t("beyond.ran", verdict=ctx.t("common.ok") if rung.ok else ctx.t("common.not_ok"),
                 rel_err=fmt(rung.rel_err, ".1e"), ms=fmt(rung.ms, ".3f"), x_sdpa=fmt(rung.x_sdpa, ".2f"),
                 dtype=rung.dtype)


def show_what_comes_next(ctx, case, cuda: bool, heading: bool = True) -> None:
    if heading:  # False: the caller shows it folded, under an expander named beyond.header
        st.header(ctx.t("beyond.header"))
    st.markdown(ctx.t("beyond.intro"))
    st.markdown(layout_table(ctx))

    st.subheader(ctx.t("beyond.csr_header"))
    tables, lens = [list(tb) for tb, _ in SEED_BATCH], [n for _, n in SEED_BATCH]
    indptr, indices, last = flashinfer_page_table(pad_block_tables(tables), lens, SEED_BLOCK_SIZE)
    st.markdown(ctx.t("beyond.csr_text", tables=tables, lens=lens, block_size=SEED_BLOCK_SIZE,
                      indptr=indptr.tolist(), indices=indices.tolist(), last=last.tolist()))

    show_layouts(ctx)  # the same tokens through FlashAttention's and FlashInfer's layouts, drawn from real tensors

    st.subheader(ctx.t("beyond.split_header"))
    st.markdown(ctx.t("beyond.split_text"))
    show_split_lab(ctx)  # the split, touchable: a partition-size knob, the reduce checked, timed live

    st.subheader(ctx.t("beyond.rungs_header"))
    st.caption(ctx.t("beyond.rungs_text", block_size=case.block_size if case else "–"))
    runs = st.session_state.setdefault(RUNS, {})
    if case is not None and not cuda and case not in runs:
        runs[case] = run_external(case, "cpu")  # nothing runs without a GPU: each rung just says why
    if cuda and case is not None and st.button(ctx.t("beyond.rungs_run"), key="fast.external_run",
                                               icon=":material/speed:"):
        with st.spinner(ctx.t("running")):
            runs[case] = run_external(case, "cuda")
    done = {r.name: r for r in runs.get(case, [])} if case is not None else {}
    st.dataframe([{ctx.t("beyond.col_kernel"): name, ctx.t("beyond.col_status"): rung_status(ctx, done.get(name))}
                  for name in EXTERNAL_RUNGS], hide_index=True, key="fast.external_table", on_select="ignore")
