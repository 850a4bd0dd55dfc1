"""5 · Bug lab: inject one classic paged-KV-cache bug, watch the output drift from a correct twin, and see which
cells of the pool it damages."""

import contextlib
import html
from dataclasses import asdict

import streamlit as st

import ui
from ui.model_picker import LOAD_ERRORS, SHIPPED, load_error, model_label, pick_model, try_load
from ui.playback import Stepper, playback_bar
from ui.safe_text import shown, shown_html
from lessons.buglab import TASKS, model_scenario, run_fault, summarize, tasks_for
from lessons.buglab_tensors import run_tensor_fault, tensor_scenario_for
from lessons.tokens import TEXT, token_pieces
from paged.faults import Fault
from paged.kv_cache import default_device
from viz.buglab import BadCellWords, bad_cells_figure, step_error_figure
from viz.pool import PoolWords
from viz.colors import OKABE_ITO, ink, seq_label, text_color

LOGITS_TOL = 1e-4  # lessons.buglab.summarize's tolerance for "this step's logits differ"
MAX_CACHED_RUNS = 24  # per session: every fault × on/off of one scenario, with room to spare
DRIFT, SAME = OKABE_ITO["vermillion"], OKABE_ITO["bluish_green"]
INK = {DRIFT: ink(DRIFT), SAME: ink(SAME)}  # each as text on white, darkened to AA contrast (viz.colors.ink)


@st.cache_resource(show_spinner=False)
def shipped_model():
    """The shipped tiny Llama and its tokenizer: immutable, shared by every session."""
    from paged.model import load_model
    return load_model(device=default_device())


ctx = ui.setup_page("buglab", icon=":material/bug_report:")
knobs = ui.Knobs("buglab")
st.title(ctx.t("title"))
ui.page_intro(ctx)
pool_slot = ui.key_figure_slot(ctx)  # presenter mode: the pool and its bar first (filled last)

FAULT_NAMES = [f.value for f in Fault]
with st.sidebar:
    st.header(ctx.t("common.settings"))
    fault = Fault(knobs.select(ctx.t("fault"), "fault", FAULT_NAMES[0], FAULT_NAMES,
                               format_func=lambda v: ctx.t(f"title_{v}")))
    if "buglab.off_widget" not in st.session_state:  # a toggle that round-trips through ?off=0/1
        st.session_state["buglab.off_widget"] = bool(knobs.state("off", 0, ui.one_of([0, 1])))
    off = st.toggle(ctx.t("fault_off"), key="buglab.off_widget", help=ctx.t("fault_off_help"))
    knobs.set_state("off", int(off))
    # the model (ui.model_picker: the shipped one, or a directory the operator allowed), loaded here because the
    # tasks depend on its tokenizer; a load error is shown with the model run below, the tensor half still works
    choice = pick_model(ctx, knobs, "buglab")
    model = tok = failure = None
    try:
        model, tok = shipped_model() if choice == SHIPPED else try_load(ctx, choice)
    except LOAD_ERRORS as err:
        failure = ((ctx.t("err_no_model", detail=shown(err, paths=[])), ctx.t("fix_no_model")) if choice == SHIPPED
                   else load_error(ctx, choice, err))
    tasks = tasks_for(tok) if tok is not None else TASKS
    task = knobs.radio(ctx.t("scenario"), "task", tasks[0], tasks, format_func=lambda v: ctx.t(f"task_{v}"))
    if "recall" not in tasks:
        st.caption(ctx.t("recall_needs_sep"))
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", 4, [2, 4, 8, 16])
    seed = knobs.number(ctx.t("seed"), "seed", 0, 0, 999)
    ui.device_badge(ctx, "float32")
active = None if off else fault  # the fault lives only in the engine / playground built for this run

# --- the fault's card ---------------------------------------------------------------------------------------------
st.subheader(ctx.t(f"title_{fault.value}"))
for col, field in zip(st.columns(4), ("what", "where", "symptom", "caught_by")):  # test names wrap at / :: _ only
    ui.card(ctx.t(f"card_{field}"), ctx.t(f"{field}_{fault.value}"), key=f"buglab.card_{field}", where=col)
if off:
    st.success(ctx.t("off_banner"), icon=":material/healing:")


# --- the model, with and without the bug --------------------------------------------------------------------------
def render_ids(tok, ids, marked: bool = False) -> str:
    """Token ids as HTML (lessons.tokens pieces: ⟨BOS⟩ / ⟨SEP⟩ / ⟨EOS⟩ and ⟨0xNN⟩ greyed). Each piece's text is
    transformed (`marked`, inside the marker: a space shown as ␣, a newline as ⏎, nothing greyed on the marker's
    colour), then escaped, then wrapped: markup is built last, so nothing ever rewrites it."""
    out = []
    for piece in token_pieces(tok, ids):
        text = piece.text
        if marked and piece.kind == TEXT:
            text = text.replace(" ", "␣").replace("\n", "⏎")
        text = shown_html(text)
        out.append(text if marked or piece.kind == TEXT else f"<span style='color:#666'>{text}</span>")
    return "".join(out)


def marked_output(tok, ids, k: int | None, color: str, arrow: str = "", drifted: bool = False) -> str:
    """The output as HTML, token k boxed in `color` (with a visible stand-in for a space); with `drifted`, what
    follows is tinted and underlined too (the faulty side: everything after the first difference is suspect)."""
    if k is None:
        return render_ids(tok, ids)
    token = render_ids(tok, ids[k:k + 1], marked=True) or "∅"
    rest = render_ids(tok, ids[k + 1:])
    if drifted:
        rest = f"<span style='color:{INK[color]};text-decoration:underline dotted'>{rest}</span>"
    return (f"{render_ids(tok, ids[:k])}<mark class='bl-marker' title='{html.escape(ctx.t('marker_title'))}' "
            f"style='background:{color};color:{text_color(color)};border-radius:3px;padding:0 2px'>"
            f"{arrow}{token}</mark>{rest}")


st.subheader(ctx.t("model_header") if choice == SHIPPED else
             ctx.t("model_header_picked", name=shown(model_label(ctx, choice))))
if failure is not None:
    ui.show_error(ctx, *failure)

run = scenario = None
if model is not None:
    scenario = model_scenario(fault, task, tok, block_size, seed)
    try:
        with st.spinner(ctx.t("running")):
            run = ui.session_cached("buglab.model_runs", (choice, active, scenario),
                                    lambda: run_fault(model, tok, active, scenario), MAX_CACHED_RUNS)
    except ValueError as err:
        ui.show_error(ctx, ctx.t("err_run", message=shown(err, paths=[])), ctx.t("fix_run"))

if run is not None:
    drifts = summarize(run, LOGITS_TOL)
    st.session_state["buglab.drifts"] = drifts  # what the tests read back
    token_step = {d.request_id: next((k for k, s in enumerate(run.steps) if s.same_tokens.get(d.request_id) is False),
                                     None) for d in drifts}
    drifted = sum(d.first_divergence is not None for d in drifts)
    if drifted:
        st.warning(ctx.t("status_drift", count=drifted, total=len(drifts)), icon=":material/bug_report:")
    elif run.max_diff > LOGITS_TOL:
        st.warning(ctx.t("status_hidden", diff=f"{run.max_diff:.1e}"), icon=":material/search:")
    else:
        st.success(ctx.t("status_identical", total=len(drifts)), icon=":material/check_circle:")
    side = ctx.t("paged_clean") if off else ctx.t("faulty")
    for d, p, c in zip(drifts, run.paged, run.contiguous):
        k = d.first_divergence
        with st.container(border=True):
            verdict = (f"<span style='color:{INK[SAME]}'>{ctx.t('same')}</span>" if k is None else
                       f"<span style='color:{INK[DRIFT]}'>{ctx.t('drift_at', index=k, step=token_step[d.request_id])}"
                       "</span>")
            mono = "font-family:monospace;white-space:pre-wrap"
            st.markdown(
                f"<b>{ctx.t('request', label=seq_label(d.request_id))}</b> · {verdict}<br>"
                f"<span style='color:#555'>{ctx.t('prompt')}:</span> "
                f"<span style='{mono}'>{render_ids(tok, p.prompt_token_ids)}</span><br>"
                f"<span style='color:#555'>{ctx.t('reference')}:</span> "
                f"<span style='{mono}'>{marked_output(tok, c.token_ids, k, SAME)}</span><br>"
                f"<span style='color:#555'>{side}:</span> "
                f"<span style='{mono}'>{marked_output(tok, p.token_ids, k, DRIFT, '▶', drifted=True)}</span>",
                unsafe_allow_html=True)
    fig = step_error_figure(list(range(len(run.steps))), [s.logits_diff for s in run.steps], LOGITS_TOL,
                            title=ctx.t("logits_title"), x_title=ctx.t("engine_step"), y_title=ctx.t("logits_y"),
                            tol_label=ctx.t("tolerance"), drift_steps=token_step, drift_label=ctx.t("first_drift"))
    fig_col, note_col = st.columns([3, 1])
    ui.show_figure(fig, "buglab.logits", where=fig_col)
    ui.notice(ctx, ctx.t("logits_notice"), where=note_col)

# --- the same bug on random tensors -------------------------------------------------------------------------------
st.subheader(ctx.t("tensor_header"))
tscenario = tensor_scenario_for(fault, seed)
trun = ui.session_cached("buglab.tensor_runs", (active, tscenario),
                         lambda: run_tensor_fault(active, tscenario), MAX_CACHED_RUNS)
intro = ctx.t("tensor_intro", steps=tscenario.num_steps, num_blocks=tscenario.num_blocks)
if tscenario.tables[-1][-1] == tscenario.num_blocks - 1:
    intro += " " + ctx.t("tensor_intro_pad", last=tscenario.num_blocks - 1)
st.caption(intro)
if fault is Fault.POSITION_OFF_BY_ONE:
    st.info(ctx.t("no_symptom"), icon=":material/explore:")

decode_steps = trun.steps[1:]
fig = step_error_figure([s.step for s in decode_steps], [s.rel_err for s in decode_steps], trun.tolerance,
                        title=ctx.t("rel_title"), x_title=ctx.t("decode_step"), y_title=ctx.t("rel_y"),
                        tol_label=ctx.t("tolerance"), drift_label=ctx.t("first_bad"),
                        drift_steps={s: trun.first_bad_step(s) for s in trun.steps[0].cached_token_counts})
fig_col, note_col = st.columns([3, 1])
ui.show_figure(fig, "buglab.rel_err", where=fig_col)
ui.notice(ctx, ctx.t(f"notice_{fault.value}"), where=note_col)

@st.fragment
def pool_section() -> None:
    """The pool at the chosen step, with its slider and playback bar: a step reruns only this (st.fragment), not
    the model runs, the cards and the two drift figures above, which a step does not change."""
    # the pool step follows the fault: a new fault starts at its first bad step (a link's ?step= wins on arrival)
    faulty_run = ui.session_cached("buglab.tensor_runs", (fault, tscenario),
                                   lambda: run_tensor_fault(fault, tscenario), MAX_CACHED_RUNS)
    if st.session_state.get("buglab.step_fault", fault) != fault:
        st.session_state["buglab.step"] = faulty_run.first_bad_step() or 1
    st.session_state["buglab.step_fault"] = fault
    # one control for the pool's step: the playback bar below (Back / Next / Play, its counter), no slider beside it
    step = min(max(knobs.state("step", faulty_run.first_bad_step() or 1, ui.int_in(0, tscenario.num_steps),
                                ("steps",)), 0),
               tscenario.num_steps)
    knobs.set_state("step", step)

    def move(by: int, last: int = tscenario.num_steps) -> bool:
        """The pool step one up or down (a callback: it sets the slider before the next run draws it)."""
        now = st.session_state["buglab.step"]
        st.session_state["buglab.step"] = max(0, min(last, now + by))
        return st.session_state["buglab.step"] != now

    bar = playback_bar(ctx, knobs, Stepper(
        "buglab", step_key="buglab.next", position=step, total=tscenario.num_steps,
        can_forward=step < tscenario.num_steps, can_back=step > 0, forward=lambda: move(1), back=lambda: move(-1)))
    knobs.sync_url(ctx.lang)
    st.caption(ctx.t("pool_step_help"))

    shown = trun.steps[step]
    words = ui.viz_labels(ctx, BadCellWords, "w")  # w_write, w_read, …: {seq} {token} are filled by the figure
    writes = trun.writes_until(step)
    pool = bad_cells_figure(tscenario.num_blocks, tscenario.block_size, shown.tables, shown.cached_token_counts, writes,
                            shown.bad_reads, title=ctx.t("pool_title", step=step), words=words,
                            pool_words=ui.viz_labels(ctx, PoolWords, "common.pool"))
    fig_col, note_col = st.columns([3, 1])
    ui.show_figure(pool, "buglab.pool", where=fig_col)
    with note_col:
        ui.notice(ctx, ctx.t("pool_notice"))
        damage = ctx.t("damage", writes=len({c.slot for c in writes}), reads=len(shown.bad_reads), step=step)
        bar.tell(damage, st.caption)  # presenter mode: on the bar's line only
        for s in trun.steps[1:step + 1]:
            if s.finished:
                st.caption(ctx.t("finished_note", seqs=", ".join(map(seq_label, s.finished)), step=s.step))


with pool_slot if pool_slot is not None else contextlib.nullcontext():
    pool_section()


def export() -> dict:
    """The trace to download, made only when the button is pressed (not on every rerun)."""
    out = {"fault": fault.value, "fault_off": off, "model": choice, "tensor": trun.to_dict()}
    if run is not None:
        out.update(scenario=asdict(scenario), drift=[asdict(d) for d in drifts],
                   steps=[s.to_dict() for s in run.steps])
    return out


ui.export_button(ctx, export, f"buglab_{fault.value}{'_off' if off else ''}.json", key="buglab.export")
