"""7 · Correct → fast: the same paged decode attention from the teaching loop to a kernel near the bound, measured
live; then why paging is worth it (KV memory reserved vs needed on a seeded request trace)."""

import streamlit as st

import ui
from ui.beyond import show_what_comes_next
from ui.safe_text import shown
from lessons.fast import (HEAD_COUNTS, HEAD_DIMS, LOOP_MAX_TOKENS, MAIN_REPS, RUNGS, SWEEP_BLOCK_SIZES,
                                SWEEP_REPS, LadderConfig, run_ladder, series)
from paged.kernels import native_error  # (importing paged.kernels registers "fused", "native", "triton")
from paged.chapters.memory import BLOCK_SIZES, TraceSpec, make_trace, simulate
from viz.fast import (fit_figure, fragmentation_figure, ladder_figure, sweep_figure, trace_figure,
                            waste_figure)

MAX_CACHED_RUNS = 8  # per session, newest kept
MAX_MODEL_LENS = [512, 1024, 2048, 4096, 8192]
BUDGETS = [16384, 32768, 65536, 131072]
HIGHLIGHT_BS = 16  # vLLM's default block_size, named in the metrics
RUNNING_KEY = "fast.running"  # the LadderConfig being measured, removed when its run ends


ctx = ui.setup_page("fast", icon=":material/speed:")
knobs = ui.Knobs("fast")
st.title(ctx.t("title"))
ui.page_intro(ctx)
cuda = ui.device_info()["device"] == "cuda"
labels = {impl: ctx.t("impl_sdpa") if impl == "sdpa" else impl for impl in RUNGS}

with st.sidebar:
    st.header(ctx.t("ladder_settings"))
    batch = knobs.slider(ctx.t("batch"), "batch", 4, 1, 16)
    context_len = knobs.slider(ctx.t("common.context_len"), "context_len", 1024, 16, 2048)
    num_heads = knobs.select(ctx.t("common.num_heads"), "num_heads", 8, HEAD_COUNTS)
    num_kv_heads = knobs.select(ctx.t("common.num_kv_heads"), "num_kv_heads", 2, HEAD_COUNTS)
    head_dim = knobs.select(ctx.t("common.head_dim"), "head_dim", 64, HEAD_DIMS)
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 16, SWEEP_BLOCK_SIZES)
    ui.device_badge(ctx, "float32")

# --- the ladder, rung by rung -------------------------------------------------------------------------------------
st.header(ctx.t("ladder_header"))
native_problem = None
if not cuda:
    with st.spinner(ctx.t("building_native")):  # the C kernel is compiled on its first use in this process
        native_problem = native_error()
half_way = (len(RUNGS) + 1) // 2  # two rows of cards: narrow columns would make each one a tall strip
rungs_box = st.expander(ctx.t("rungs_fold"), icon=":material/stairs:")  # reference: folded
cards = [*rungs_box.columns(half_way), *rungs_box.columns(half_way)]
for col, impl in zip(cards, RUNGS):
    with col.container(border=True, height="stretch"):
        st.markdown(f"**{ctx.t(f'rung_{impl}')}**  \n{ctx.t(f'does_{impl}')}")
        if impl == "triton" and not cuda:
            st.caption(ctx.t("triton_cpu_note"))
        if impl == "native":
            if cuda:
                st.caption(ctx.t("native_gpu_note"))
            elif native_problem:
                st.caption(ctx.t("native_missing_note", reason=native_problem))

config = None
if num_heads % num_kv_heads:
    ui.show_error(ctx, ctx.t("gather.err_gqa", num_heads=num_heads, num_kv_heads=num_kv_heads),
                  ctx.t("gather.fix_gqa", num_heads=num_heads,
                        options=", ".join(str(k) for k in HEAD_COUNTS if num_heads % k == 0)))

tokens = batch * context_len
run_col, loop_col = st.columns([1, 3], vertical_alignment="center")
if "fast.loop_widget" not in st.session_state:  # a checkbox that round-trips through ?loop=0/1
    st.session_state["fast.loop_widget"] = bool(knobs.state("loop", 1, ui.one_of([0, 1])))
with loop_col:
    loop = st.checkbox(ctx.t("loop_include"), key="fast.loop_widget", disabled=tokens > LOOP_MAX_TOKENS,
                       help=ctx.t("loop_help", max_tokens=LOOP_MAX_TOKENS))
    if tokens > LOOP_MAX_TOKENS:
        st.caption(ctx.t("loop_skipped", tokens=tokens, max_tokens=LOOP_MAX_TOKENS))
knobs.set_state("loop", int(loop))
if not num_heads % num_kv_heads:
    config = LadderConfig(batch, context_len, num_heads, num_kv_heads, head_dim, block_size, loop)
clicked = run_col.button(ctx.t("run"), key="fast.run", type="primary", icon=":material/speed:",
                         disabled=config is None, wrap=True)  # a narrow column: wrap, never cut the label

def rung_rows(results) -> tuple[list[dict], list[dict]]:
    """The ladder table's rows (every rung, a skipped loop named) and the bars' data, from one
    CaseResult's results."""
    by_impl, table, bars = {r.impl: r for r in results}, [], []
    for impl in RUNGS:
        r = by_impl.get(impl)
        row = {ctx.t("col_rung"): labels[impl]}
        if r is None:
            if impl == "loop":
                reason = (ctx.t("skipped", max_tokens=LOOP_MAX_TOKENS) if config.loop
                          else ctx.t("not_chosen"))
                table.append({**row, ctx.t("col_check"): reason})
            continue
        check = ctx.t("common.ok") if r.ok else ctx.t("common.not_ok")
        table.append({**row, ctx.t("col_check"): check,
                      ctx.t("col_ms"): f"{r.ms:.3f}", ctx.t("col_x_sdpa"): f"{r.x_sdpa:.2f}",
                      ctx.t("col_gbps"): f"{r.gbps:.3g}", ctx.t("col_pct_bw"): f"{r.pct_bw:.2g}",
                      ctx.t("col_rel_err"): f"{r.rel_err:.1e}"})
        bars.append(dict(impl=impl, label=labels[impl], ms=r.ms, ok=r.ok, x_sdpa=r.x_sdpa))
    return table, bars


runs = st.session_state.setdefault("fast.runs", {})
# A run is marked while it measures. Any change to the page (a setting, Run again, leaving the page) makes Streamlit
# stop this script at its next call and start it over, so a mark still here on the next run means the last run was
# cut short: say so, instead of silently showing "press Run" again.
stopped = st.session_state.pop(RUNNING_KEY, None) is not None
if clicked and config is not None:
    st.session_state[RUNNING_KEY] = config
    try:
        with st.spinner(ctx.t("running")):
            bar, live = st.progress(0.0), st.empty()  # live: the own rungs, once measured
            run = run_ladder(config, progress=lambda done, total: bar.progress(
                done / total, text=ctx.t("progress", done=done, total=total)),
                shown=lambda case: live.dataframe(rung_rows(case.results)[0], hide_index=True))
            bar.empty()
            live.empty()
        runs[config] = run
        while len(runs) > MAX_CACHED_RUNS:
            runs.pop(next(iter(runs)))
    except (ValueError, RuntimeError, MemoryError) as err:
        ui.show_error(ctx, ctx.t("err_run", message=shown(err, paths=[])), ctx.t("fix_run"))
    del st.session_state[RUNNING_KEY]  # finished (or refused with its error shown): not cut short
elif stopped:
    st.warning(ctx.t("run_stopped"), icon=":material/block:")
run = runs.get(config) if config is not None else None

if config is not None and run is None:
    st.info(ctx.t("press_run"), icon=":material/timer:")
elif run is not None:
    load = "–" if run.load_avg is None else f"{run.load_avg:.1f}"
    st.caption(ctx.t("measured", device=run.device, threads=run.threads, reps=MAIN_REPS, sweep_reps=SWEEP_REPS,
                     bw=run.read_bw_gbps, load=load, seconds=run.seconds))
    if run.ok:
        st.success(ctx.t("all_ok"), icon=":material/check_circle:")
    else:
        st.error(ctx.t("some_bad"), icon=":material/error:")
    # gather runs SDPA itself after a copy: faster than SDPA alone means the machine was busy. (native may beat SDPA:
    # it is shaped for decode, SDPA is general.)
    beat = [labels[r.impl] for r in run.main.results if r.impl == "gather" and r.x_sdpa < 0.9]
    if beat:
        st.warning(ctx.t("noisy", rungs=", ".join(beat)), icon=":material/casino:")
    table, bars = rung_rows(run.main.results)
    st.session_state["fast.rows"] = table  # what the tests read back
    fig_col, note_col = st.columns([3, 1])
    with fig_col:
        st.dataframe(table, hide_index=True, key="fast.table", on_select="ignore")
        ui.show_figure(ladder_figure(bars, ctx.t("ladder_title"), ctx.t("ms_x")), "fast.ladder")
    ui.notice(ctx, ctx.t("ladder_notice"), where=note_col)

    sweeps = st.expander(ctx.t("sweep_header"), icon=":material/stacked_line_chart:")  # reference
    fig = sweep_figure(series(run.by_context, "context_len", "ms"), labels,
                       ctx.t("ctx_ms_title", batch=batch, block_size=block_size), "context_len", ctx.t("ms_y"))
    fig_col, note_col = sweeps.columns([3, 1])
    ui.show_figure(fig, "fast.ctx_ms", where=fig_col)
    ui.notice(ctx, ctx.t("ctx_ms_notice"), where=note_col)
    fig = sweep_figure(series(run.by_context, "context_len", "gbps"), labels, ctx.t("ctx_gbps_title"),
                       "context_len", ctx.t("gbps_y"), ref=run.read_bw_gbps, ref_label=ctx.t("read_bw"))
    fig_col, note_col = sweeps.columns([3, 1])
    ui.show_figure(fig, "fast.ctx_gbps", where=fig_col)
    ui.notice(ctx, ctx.t("ctx_gbps_notice"), where=note_col)
    fig = sweep_figure(series(run.by_block_size, "block_size", "ms"), labels,
                       ctx.t("bs_title", context_len=context_len), ctx.t("bs_x"), ctx.t("ms_y"))
    fig_col, note_col = sweeps.columns([3, 1])
    ui.show_figure(fig, "fast.bs_ms", where=fig_col)
    ui.notice(ctx, ctx.t("bs_notice"), where=note_col)

# --- memory waste -------------------------------------------------------------------------------------------------
st.header(ctx.t("memory_header"))
st.caption(ctx.t("memory_intro"))
metrics_box = st.container()  # the four numbers open; the settings and the figures folded below
details = st.expander(ctx.t("memory_fold"), icon=":material/bar_chart:")
c1, c2, c3, c4 = details.columns(4)
seed = knobs.number(ctx.t("mem_seed"), "seed", 0, 0, 9999, where=c1)
num_requests = knobs.slider(ctx.t("mem_requests"), "requests", 300, 20, 1000, where=c2)
max_model_len = knobs.select(ctx.t("mem_max_model_len"), "max_model_len", 2048, MAX_MODEL_LENS, where=c3)
budget = knobs.select(ctx.t("mem_budget"), "budget", 65536, BUDGETS, where=c4, format_func="{:,}".format)
knobs.sync_url(ctx.lang)

half = min(1024, max_model_len // 2)  # prompt and output are each clipped to half of max_model_len (at most 1024)
report = None
try:
    spec = TraceSpec(num_requests=num_requests, seed=seed, prompt_max=half, output_max=half,
                     max_model_len=max_model_len)
except ValueError as err:
    with metrics_box:
        ui.show_error(ctx, ctx.t("err_trace", message=shown(err, paths=[])), ctx.t("fix_trace"))
else:
    with st.spinner(ctx.t("computing_memory")):
        report = ui.session_cached("fast.memory", (spec, budget),
                                   lambda: simulate(spec, BLOCK_SIZES, budget), MAX_CACHED_RUNS)
        final_lens = ui.session_cached("fast.traces", spec,
                                       lambda: [r.final_len for r in make_trace(spec)], MAX_CACHED_RUNS)
    fields = {k: getattr(spec, k) for k in ("num_requests", "seed", "prompt_median", "prompt_sigma", "prompt_min",
                                            "prompt_max", "output_median", "output_sigma", "output_min",
                                            "output_max")}
    details.markdown(ctx.t("trace_desc", **fields))
    by = {(r.scheme, r.block_size): r for r in report.results}
    contiguous, paged16 = by[("max_len", None)], by[("paged", HIGHLIGHT_BS)]
    m1, m2, m3, m4 = metrics_box.columns(4)
    m1.metric(ctx.t("m_waste_max"), f"{contiguous.waste_pct:.1f}%", help=ctx.t("m_help"))
    m2.metric(ctx.t("m_waste_paged"), f"{paged16.waste_pct:.1f}%", help=ctx.t("m_help"))
    m3.metric(ctx.t("m_fit_max"), contiguous.fit_requests)
    m4.metric(ctx.t("m_fit_paged"), paged16.fit_requests)

    fig_col, note_col = details.columns([3, 1])
    ui.show_figure(trace_figure(final_lens, max_model_len, ctx.t("trace_title"), ctx.t("trace_x"),
                                ctx.t("trace_y"), mean_label=ctx.t("trace_mean")), "fast.trace", where=fig_col)
    ui.notice(ctx, ctx.t("trace_notice"), where=note_col)

    names = [ctx.t(f"scheme_{r.scheme}", block_size=r.block_size) if r.scheme == "paged"
             else ctx.t(f"scheme_{r.scheme}") for r in report.results]
    fig = waste_figure(names, [r.waste_pct for r in report.results], [r.decode_waste_pct for r in report.results],
                       ctx.t("waste_title"), ctx.t("waste_y"), ctx.t("waste_final"), ctx.t("waste_decode"))
    fig_col, note_col = details.columns([3, 1])
    ui.show_figure(fig, "fast.waste", where=fig_col)
    ui.notice(ctx, ctx.t("waste_notice"), where=note_col)

    fig = fit_figure(names, [r.scheme for r in report.results], [r.fit_requests for r in report.results],
                     ctx.t("fit_title", budget=f"{budget:,}"), ctx.t("fit_y"))
    fig_col, note_col = details.columns([3, 1])
    ui.show_figure(fig, "fast.fit", where=fig_col)
    ui.notice(ctx, ctx.t("fit_notice"), where=note_col)

    paged = [r for r in report.results if r.scheme == "paged"]
    fig = fragmentation_figure([r.block_size for r in paged], [r.waste_per_request for r in paged],
                               ctx.t("frag_title"), ctx.t("bs_x"), ctx.t("frag_y"), ctx.t("frag_measured"),
                               ctx.t("frag_expected"))
    fig_col, note_col = details.columns([3, 1])
    ui.show_figure(fig, "fast.frag", where=fig_col)
    ui.notice(ctx, ctx.t("frag_notice"), where=note_col)
    details.caption(ctx.t("external_note"))

# --- what comes next: vLLM, FlashAttention, FlashInfer; split-K; outside kernels as extra rungs --------------
with st.expander(ctx.t("beyond.header"), icon=":material/rocket_launch:"):  # reference: folded
    show_what_comes_next(ctx, config.case() if config is not None else None, cuda, heading=False)

export = {"ladder": run.to_dict() if run is not None else None, "config": dict(knobs.values),
          "memory": report.to_dict() if report is not None else None}
ui.export_button(ctx, export, "correct_to_fast.json", key="fast.export")
