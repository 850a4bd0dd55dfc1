"""Streamlit glue for pages 4 · Engine and 6 · Sharing around their one lesson (lessons.engine.EngineLesson).

    config = config_sidebar(ctx, knobs, SCENARIOS, default, fields, scenario_label)   # inside `with st.sidebar`
    lesson = engine_lesson(ctx, "engine", config, model, tokenizer, default_specs)  # session_state, URL, sync
    bar = engine_controls(ctx, knobs, lesson)     # playback bar (Back, Step, Play) + Run to end + Reset
    request_numbers(ctx, "engine", 64, 0.0)      # the Add form's numbers, its button, the last Add's outcome
    show_messages(ctx, lesson)                    # the last add's outcome, rejected requests, an engine failure
    trace = announce_step(ctx, bar, lesson)       # the decision box; the last step's StepTrace (None before any)
    keep_row(ctx, lesson, "engine_trace.json", "engine")  # at the end: Export and the share hint

Everything that is not Streamlit (replay, back, reset, a new config, adding, failures) is the lesson's; here are only
the widgets, the URL, session_state keys and message boxes. Every key lives under the page's prefix
("engine.lesson", "engine.new_text", …), so the two pages never share state. Callbacks read the lesson from
session_state, never from a run's locals (ui.playback).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

import streamlit as st

from lessons.engine import EngineLesson
from lessons.engine_requests import (BOUNDS, DemoConfig, RequestError, RequestSpec, Scenario,
                                     decode_requests)
from viz.colors import seq_label

from .page import PageContext
from .links import open_link
from .params import MAX_LINK_STEPS, STEP_ALIASES, Knobs, note_past_end, read_param
from .parsers import MAX_WHOLE_CHARS, int_in, parse_whole, quoted
from .playback import Stepper, playback_bar
from .safe_text import shown
from .widgets import export_button, show_error, stop_with_error


MAX_RUN_STEPS = 128  # one press of Run to end runs at most this many steps (~4-8 s of CPU), with a note past it
RUN_GIVE_WAY_S = 0.5  # between two of its steps, Run to end waits at most this long for another learner's run

FIELD_LABELS = {"max_tokens": "engine.max_tokens", "temperature": "engine.temperature", "seed": "engine.seed",
                "n": "sharing.n"}  # a form field -> the key of its label
CONFIG_KNOBS = {  # DemoConfig field -> (widget, label key, choices or (lo, hi), help key): the sidebar's knobs
    "block_size": ("select", "common.block_size", (1, 2, 4, 8, 16, 32), None),
    "num_blocks": ("slider", "common.num_blocks", (4, 256), None),
    "watermark": ("select", "engine.watermark", (0.0, 0.01, 0.05, 0.1, 0.2), None),
    "max_num_batched_tokens": ("select", "engine.max_num_batched_tokens", (16, 32, 64, 128, 256, 512, 1024, 2048),
                               None),
    "max_num_seqs": ("slider", "engine.max_num_seqs", (1, 16), None),
    "enable_chunked_prefill": ("toggle", "engine.chunked_prefill", None, "engine.chunked_prefill_help"),
    "enable_prefix_caching": ("toggle", "engine.prefix_caching", None, "engine.prefix_caching_help"),
}


def lesson_key(prefix: str) -> str:
    """Where page `prefix` keeps its EngineLesson in st.session_state."""
    return f"{prefix}.lesson"


def status_text(ctx, status: str, finish_reason: str | None) -> str:
    """A sequence's status in the page's language, with why it finished: "finished (eos)"."""
    text = ctx.t(f"engine.status_{status}")
    return f"{text} ({ctx.t(f'engine.reason_{finish_reason}')})" if finish_reason else text


def why_values(values: dict) -> dict:
    """A why piece's values as a page names them: a sequence by its letter (seq 2 -> "C"), a list of them "B, C"."""
    out = dict(values)
    if "seq" in out:
        out["seq"] = seq_label(out["seq"])
    if "seqs" in out:
        out["seqs"] = ", ".join(map(seq_label, out["seqs"])) or "—"
    return out


def why_sep(ctx) -> str:
    """What joins the pieces of a why: "; ", in 简体中文 "；"."""
    return "；" if ctx.lang == "zh" else "; "


def explain_step(ctx, why) -> str:
    """A step's why (the scheduler's (code, values) pieces) in the page's language, sequences by letter (why_values),
    joined with why_sep."""
    return why_sep(ctx).join(ctx.t(f"engine.why_{code}", **why_values(values)) for code, values in why)


def engine_model(ctx: PageContext, knobs: Knobs | None = None, prefix: str | None = None):
    """(model, tokenizer) for pages 4 and 6: with `knobs`, the sidebar's model picker (ui.model_picker: the shipped
    model or an operator-allowed directory, `?model=`; `prefix` is the page's, its lesson replayed on a change),
    else the shipped model. An error box with the fix (and the page stops) when it cannot load."""
    from .model_picker import SHIPPED, load_choice, pick_model

    choice = pick_model(ctx, knobs, prefix or knobs.page) if knobs is not None else SHIPPED
    return load_choice(ctx, choice)


# --- the sidebar: a scenario menu and the configuration's knobs --------------------------------------------------------
def load_requests(prefix: str, specs: list[RequestSpec]) -> None:
    """Page `prefix` replays `specs` from step 0 on its next run (a scenario picked, a new model)."""
    lesson = st.session_state.get(lesson_key(prefix))
    if lesson is not None:
        lesson.load(specs)
    else:  # no lesson yet (it could not be built): the first one starts from these
        st.session_state[f"{prefix}.load"] = list(specs)


def _load_scenario(knobs: Knobs, scenarios: Mapping[str, Scenario], fields: Sequence[str]) -> None:
    """Scenario menu callback: its knobs into the widgets, its requests into the lesson's next sync."""
    key = knobs.key("scenario")
    name = st.session_state.get(key)
    if name is None:
        return
    scenario = scenarios[name]
    for field in fields:
        st.session_state[knobs.key(field)] = getattr(scenario.config, field)
    load_requests(knobs.page, list(scenario.requests))
    st.session_state[key] = None


def config_sidebar(ctx: PageContext, knobs: Knobs, scenarios: Mapping[str, Scenario], default: DemoConfig,
                   fields: Mapping[str, Sequence | None], scenario_label: Callable[[str], str]) -> DemoConfig:
    """The scenario menu, then one knob per DemoConfig field in `fields` (choices or (lo, hi) of CONFIG_KNOBS, or
    the page's own where given), seeded from `default` and the URL; returns `default` with the knobs' values."""
    st.selectbox(ctx.t("engine.scenario"), list(scenarios), index=None, key=knobs.key("scenario"),
                 placeholder=ctx.t("engine.scenario_placeholder"), format_func=scenario_label,
                 on_change=_load_scenario, args=(knobs, scenarios, tuple(fields)))
    values = {}
    for field, own in fields.items():
        widget, label, choices, help_key = CONFIG_KNOBS[field]
        choices, value = own or choices, getattr(default, field)
        if widget == "select":
            values[field] = knobs.select(ctx.t(label), field, value, list(choices))
        elif widget == "slider":
            values[field] = knobs.slider(ctx.t(label), field, value, *choices)
        else:
            values[field] = knobs.toggle(ctx.t(label), field, value, help=ctx.t(help_key))
    return replace(default, **values)


# --- the lesson in session_state ---------------------------------------------------------------------------------------
def engine_lesson(ctx: PageContext, prefix: str, config: DemoConfig, model, tokenizer,
                  default_specs: list[RequestSpec]) -> EngineLesson:
    """This run's lesson: on the session's first visit the URL's requests and step (else `default_specs`), after
    that the same object synced with this run's config and model (a toast when that replayed from step 0). An
    engine that cannot be built at all is an error box with the fix, and the page stops."""
    state = st.session_state
    lesson: EngineLesson | None = state.get(lesson_key(prefix))
    try:
        if lesson is None:
            specs, steps = state.pop(f"{prefix}.load", None), 0
            if specs is None:
                url_text = read_param("reqs", lambda text: text if decode_requests(text) is not None else None, "")
                url_specs = decode_requests(url_text) if url_text else None
                specs = url_specs if url_specs is not None else default_specs
                steps = read_param("steps", int_in(0, MAX_LINK_STEPS), 0, STEP_ALIASES["steps"])
            lesson = state[lesson_key(prefix)] = open_link(config, specs, steps, model, tokenizer)
            if len(lesson.steps) < steps:  # the link asked for more steps than the requests take
                note_past_end("steps", len(lesson.steps))
        elif lesson.sync(config, model, tokenizer):
            st.toast(ctx.t("engine.restarted"), icon=":material/replay:")
    except (RuntimeError, ValueError) as err:  # no engine at all (e.g. a KV pool larger than free memory)
        stop_with_error(ctx, ctx.t("model.err_engine", message=shown(err, paths=[])), ctx.t("model.fix_engine"))
    return lesson


def _lesson(prefix: str) -> EngineLesson:
    return st.session_state[lesson_key(prefix)]


def _run(ctx: PageContext, prefix: str) -> None:
    """Run to end: at most MAX_RUN_STEPS steps per press (news "run_capped" past it), giving way between steps
    while another learner's run is under way (ui.capacity.yielding_run), so theirs interleave with this one."""
    from .capacity import yielding_run

    with st.spinner(ctx.t("engine.running")), yielding_run() as give_way:
        _lesson(prefix).run(MAX_RUN_STEPS, lambda: give_way(RUN_GIVE_WAY_S))


def engine_controls(ctx: PageContext, knobs: Knobs, lesson: EngineLesson, where=None):
    """The playback bar (Back, Step, Play: ui.playback), Run to end and Reset in its row. The form's Add is logged by
    the bar's ledger too, so an Add pressed while the page plays is applied exactly once; `where`: presenter mode's
    key-figure slot (ui.page.key_figure_slot). Returns the bar (its `say` tells presenter mode what the step did)."""
    prefix = knobs.page
    bar = playback_bar(ctx, knobs, Stepper(
        prefix, step_key=f"{prefix}.step", position=len(lesson.steps),
        can_forward=lesson.can_step(), can_back=bool(lesson.steps), forward=lambda: _lesson(prefix).forward(),
        back=lambda: _lesson(prefix).back(),
        extra={f"{prefix}.add": lambda: add_from_form(prefix, *st.session_state[f"_add_defaults.{prefix}"])}),
        where=where)
    bar.row.button(ctx.t("engine.run"), key=f"{prefix}.run", icon=":material/fast_forward:", on_click=_run,
                   args=(ctx, prefix), disabled=not lesson.can_step())
    bar.row.button(ctx.t("common.reset"), key=f"{prefix}.reset", icon=":material/restart_alt:",
                   on_click=lambda: _lesson(prefix).reset())
    return bar


def keep_row(ctx: PageContext, lesson: EngineLesson, file_name: str, prefix: str) -> None:
    """Keep this state, at the page's end: Export (the whole trace as a file) at its own width, never cut, and the
    share hint (its link is the URL) beside it, under it where narrow; at a projector nobody copies the link."""
    row = st.container(key=f"{prefix}.keep", horizontal=True, vertical_alignment="center")
    export_button(ctx, lesson.trace_text, file_name, key=f"{prefix}.export", where=row)
    if not ctx.present:
        row.caption(ctx.t("common.share_hint"))


def request_numbers(ctx: PageContext, prefix: str, max_tokens: int, temperature: float, with_n: bool = False,
                    label: Callable[[int], str] = seq_label) -> None:
    """The Add form's row of numbers (max_tokens, temperature, seed, and n where `with_n`), its Add button and, under
    it, how the last Add went (`label`: seq_id -> the name the page shows; see show_add_outcome). `max_tokens`,
    `temperature`: the form's defaults. Keys "{prefix}.new_max_tokens", … (read by add_from_form)."""
    cols = st.columns([1.6, 1.6, 1.2, 1.2] if with_n else [2, 2, 1.2], vertical_alignment="bottom")  # "seed (sampling)": whole
    cols[0].slider(ctx.t("engine.max_tokens"), 1, 128, max_tokens, key=f"{prefix}.new_max_tokens")
    cols[1].slider(ctx.t("engine.temperature"), 0.0, 2.0, temperature, 0.1, key=f"{prefix}.new_temperature")
    # text boxes, read by add_from_form: a whole number out of range reaches the lesson, which refuses it by name,
    # and anything else is refused by name there. (Streamlit's number input would refuse an out-of-range value,
    # 2**53 or more even without bounds, with a red border only, and Add would then use the old value silently.)
    cols[2].text_input(ctx.t("engine.seed"), value="0", key=f"{prefix}.new_seed", max_chars=MAX_WHOLE_CHARS,
                       help=ctx.t("engine.seed_help"))
    if with_n:
        cols[3].text_input(ctx.t("sharing.n"), value="1", key=f"{prefix}.new_n", max_chars=MAX_WHOLE_CHARS,
                           help=ctx.t("sharing.n_help"))
    st.session_state[f"_add_defaults.{prefix}"] = (max_tokens, temperature)  # for an Add the ledger logged
    st.button(ctx.t("engine.add"), key=f"{prefix}.add", icon=":material/add:", on_click=add_from_form,
              args=(prefix, max_tokens, temperature))
    show_add_outcome(ctx, st.session_state.pop(f"{prefix}.add_news", {}), label)


def show_add_outcome(ctx: PageContext, news: Mapping[str, object], label: Callable[[int], str] = seq_label) -> None:
    """The outcome of an Add (news "added": the request's id, None if it arrives later; "add_error": a RequestError)
    as a success or error box. Drawn by the form, outside the step fragment: while the page plays, a step reruns only
    the fragment, so the box stays until the next whole-page run instead of vanishing with the next step."""
    if "added" in news:
        rid = news["added"]
        st.success(ctx.t("engine.added", seq="—" if rid is None else label(rid)), icon=":material/add:")
    if "add_error" in news:
        show_request_error(ctx, news["add_error"])


def announce_step(ctx: PageContext, bar, lesson: EngineLesson):
    """The decision box: the page's own "no_step_yet" (or, where no step can run, the engine page's
    "no_step_possible": both pages ask for it, only ui/strings/engine.py holds it), or the last step's number, phase
    and the scheduler's why (also what presenter mode says, `bar.say`). Returns the last step's paged StepTrace
    (None before any step)."""
    trace = lesson.last.paged if lesson.last else None
    if trace is None:  # "press Step" only where Step can run
        said, icon = ctx.t("no_step_yet" if lesson.can_step() else "engine.no_step_possible"), ":material/flag:"
    else:
        said, icon = ctx.t("engine.step_info", step=len(lesson.steps), phase=trace.phase,
                           reason=explain_step(ctx, trace.why)), ":material/explore:"
    bar.tell(said, st.info, icon=icon)
    return trace


def add_from_form(prefix: str, max_tokens: int, temperature: float) -> None:
    """The Add button's callback: the request the form describes (`max_tokens`, `temperature`: the form's
    defaults) offered to the lesson; show_messages says how it went."""
    get, key = st.session_state.get, lambda name: f"{prefix}.{name}"  # noqa: E731
    lesson = _lesson(prefix)
    typed = {name: get(key(f"new_{name}"), str(default)) for name, default in (("seed", 0), ("n", 1))}
    whole = {name: parse_whole(text) for name, text in typed.items()}
    bad = [name for name, value in whole.items() if value is None]
    if bad:  # nothing offered: the form's text is not a number at all
        lo, hi = BOUNDS[bad[0]]
        err = RequestError("not_a_number", f"{bad[0]} = {typed[bad[0]]!r} is not a whole number", field=bad[0],
                           text=quoted(typed[bad[0]]), lo=lo, hi=hi)
        st.session_state[key("add_news")] = {"add_error": err}
        return
    lesson.offer(RequestSpec(get(key("new_text"), ""), get(key("new_task"), "recall"),
                             int(get(key("new_max_tokens"), max_tokens)),
                             float(get(key("new_temperature"), temperature)),
                             whole["seed"], whole["n"], len(lesson.steps)))
    st.session_state[key("add_news")] = {k: lesson.news.pop(k) for k in ("added", "add_error") if k in lesson.news}


# --- messages ----------------------------------------------------------------------------------------------------------
def show_request_error(ctx: PageContext, err: RequestError, spec: RequestSpec | None = None) -> None:
    """err_<code> / fix_<code> of ui/strings/engine.py, filled with the error's numbers (a form field by the label
    the form shows); `spec`: the refused request, named first by its prompt (a refusal from a link or a scenario,
    where several may be listed)."""
    t = ctx.t
    detail = dict(err.detail)
    if "field" in detail:
        detail["label"] = t(FIELD_LABELS.get(detail["field"], detail["field"]))
    said = t(f"engine.err_{err.code}", message=shown(err, paths=[]), **detail)
    if spec is not None:
        said = t("engine.refused_request", prompt=quoted(spec.prompt, 40), step=spec.at_step) + " " + said
    show_error(ctx, said, t(f"engine.fix_{err.code}", **detail))


def show_messages(ctx: PageContext, lesson: EngineLesson, label: Callable[[int], str] = seq_label) -> None:
    """The last add's outcome, every request the engine rejected, and an engine failure (then forgotten).
    label: seq_id -> the name the page shows it by (a page drawing display ids passes its own)."""
    news, t = lesson.take_news(), ctx.t
    show_add_outcome(ctx, news, label)  # an add made outside the form (the form's own are shown by the form)
    for spec, err in lesson.rejected:
        show_request_error(ctx, err, spec)
    if "run_capped" in news:
        st.info(t("engine.run_capped", steps=news["run_capped"]), icon=":material/pause_circle:")
    if "failure" in news:
        code, message = news["failure"]
        show_error(ctx, t(f"engine.err_{code}", message=message), t(f"engine.fix_{code}"))
