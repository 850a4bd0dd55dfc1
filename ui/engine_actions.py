"""The engine demo a page keeps in st.session_state, and its action buttons (pages 4 · Engine and 6 · Sharing).

    session = EngineSession(ctx, "engine", config, model, tokenizer)
    demo = session.current(default_specs)   # after a scenario pick, on first visit (the URL's log), on a new config
    a1.button(…, on_click=session.do_step)  # do_step · do_run · do_reset · do_add(max_tokens=…, temperature=…)
    Stepper(…, forward=session.forward, back=session.back)   # the playback bar (ui.playback)
    session.show_messages(demo)             # the last add's outcome, rejected requests, an engine failure

Every key lives under the page's prefix ("engine.demo", "engine.new_text", …), so the two pages never share state.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

from lessons.engine import EngineDemo
from lessons.engine_requests import MAX_STEPS, DemoConfig, RequestError, RequestSpec, decode_requests
from viz.colors import seq_label

from .page import PageContext
from .params import Knobs, int_in, read_param
from .widgets import show_error, stop_with_error


FIELD_LABELS = {"max_tokens": "engine.max_tokens", "temperature": "engine.temperature", "seed": "engine.seed",
                "n": "sharing.n"}  # a form field -> the key of its label


def status_text(ctx, status: str, finish_reason: str | None) -> str:
    """A sequence's status in the page's language, with why it finished: "finished (eos)"."""
    text = ctx.t(f"engine.status_{status}")
    return f"{text} ({ctx.t(f'engine.reason_{finish_reason}')})" if finish_reason else text


def explain_step(ctx, why) -> str:
    """A step's why (the scheduler's (code, values) pieces) in the page's language, joined with "; "."""
    return "; ".join(ctx.t(f"engine.why_{code}", **values) for code, values in why)


def engine_model(ctx: PageContext, knobs: Knobs | None = None, prefix: str | None = None):
    """(model, tokenizer) for pages 4 and 6: with `knobs`, the sidebar's model picker (ui.model_picker: the shipped
    model or an operator-allowed directory, `?model=`; `prefix` is the page's EngineSession prefix, replayed on a
    change), else the shipped model. An error box with the fix (and the page stops) when it cannot load."""
    from .model_picker import SHIPPED, load_choice, pick_model

    choice = pick_model(ctx, knobs, prefix or knobs.page) if knobs is not None else SHIPPED
    return load_choice(ctx, choice)


class EngineSession:
    """One page's EngineDemo in st.session_state[f"{prefix}.demo"], rebuilt from its request log when needed."""

    def __init__(self, ctx: PageContext, prefix: str, config: DemoConfig, model, tokenizer):
        self.ctx, self.prefix, self.config, self.model, self.tokenizer = ctx, prefix, config, model, tokenizer

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def replay(self, specs: list[RequestSpec], steps: int) -> EngineDemo:
        """The session rebuilt from its log; if the engine refuses a step, it starts again at step 0 (error shown)."""
        try:
            new = EngineDemo.replay(self.config, specs, steps, self.model, self.tokenizer)
        except (RuntimeError, ValueError) as err:
            st.session_state[self.key("failure")] = ("replay_failed", str(err))
            try:
                new = EngineDemo.replay(self.config, specs, 0, self.model, self.tokenizer)
            except (RuntimeError, ValueError) as err:  # no engine at all (e.g. a KV pool larger than free memory)
                st.session_state.pop(self.key("failure"), None)
                stop_with_error(self.ctx, self.ctx.t("model.err_engine", message=str(err)),
                                self.ctx.t("model.fix_engine"))
        st.session_state[self.key("demo")] = new
        return new

    def current(self, default_specs: list[RequestSpec]) -> EngineDemo:
        """This run's demo: a picked scenario (or reset) from step 0; on the session's first visit the URL's requests
        and step, else `default_specs`; a changed config replays the same requests from step 0."""
        demo: EngineDemo | None = st.session_state.get(self.key("demo"))
        if self.key("load") in st.session_state:
            return self.replay(st.session_state.pop(self.key("load")), 0)
        if demo is None:
            url_text = read_param("reqs", lambda text: text if decode_requests(text) is not None else None, "")
            url_specs = decode_requests(url_text) if url_text else None
            return self.replay(url_specs if url_specs is not None else default_specs,
                               read_param("steps", int_in(0, MAX_STEPS), 0))
        if demo.config != self.config:
            demo = self.replay(demo.all_specs(), 0)
            st.toast(self.ctx.t("engine.restarted"), icon=":material/replay:")
        return demo

    # --- actions (callbacks: they run before the page is drawn, so every widget below sees the new state) ------
    def guarded(self, action) -> None:
        """Run an engine action; an engine error is kept for an error box instead of a traceback."""
        try:
            action()
        except (RuntimeError, ValueError) as err:
            st.session_state[self.key("failure")] = ("step_failed", str(err))

    def do_step(self) -> None:
        self.forward()

    def forward(self) -> bool:
        """One engine step (the playback bar's Step and Play); False when there is nothing left to run."""
        demo: EngineDemo = st.session_state[self.key("demo")]
        if not demo.can_step():
            return False
        self.guarded(demo.step)
        return True

    def back(self) -> bool:
        """Back: the same requests replayed to one step fewer, exactly the state the page had then."""
        demo: EngineDemo = st.session_state[self.key("demo")]
        if not demo.steps:
            return False
        self.replay(demo.all_specs(), len(demo.steps) - 1)
        return True

    def do_run(self) -> None:
        with st.spinner(self.ctx.t("engine.running")):
            self.guarded(st.session_state[self.key("demo")].run_to_end)

    def do_reset(self) -> None:
        st.session_state[self.key("load")] = st.session_state[self.key("demo")].all_specs()

    def do_add(self, max_tokens: int, temperature: float) -> None:
        """Add the request described by the form (`max_tokens`, `temperature`: the form's defaults); the outcome is
        shown by show_messages."""
        get, key = st.session_state.get, self.key
        live = st.session_state[key("demo")]
        spec = RequestSpec(get(key("new_text"), ""), get(key("new_task"), "recall"),
                           int(get(key("new_max_tokens"), max_tokens)),
                           float(get(key("new_temperature"), temperature)),
                           int(get(key("new_seed"), 0)), int(get(key("new_n"), 1)), len(live.steps))
        try:
            st.session_state[key("added")] = live.add(spec)
        except RequestError as err:
            st.session_state[key("add_error")] = err

    # --- messages -------------------------------------------------------------------------------------------------
    def show_request_error(self, err: RequestError) -> None:
        """err_<code> / fix_<code> of ui/strings/engine.py, filled with the error's numbers (a form field by the
        label the form shows)."""
        t = self.ctx.t
        detail = dict(err.detail)
        if "field" in detail:
            detail["label"] = t(FIELD_LABELS.get(detail["field"], detail["field"]))
        show_error(self.ctx, t(f"engine.err_{err.code}", message=str(err), **detail),
                   t(f"engine.fix_{err.code}", **detail))

    def show_messages(self, demo: EngineDemo, label: Callable[[int], str] = seq_label) -> None:
        """The last add's outcome, every request the engine rejected, and an engine failure (then forgotten).
        label: seq_id -> the name the page shows it by (a page drawing display ids passes its own)."""
        state, t = st.session_state, self.ctx.t
        if self.key("added") in state:
            rid = state.pop(self.key("added"))
            st.success(t("engine.added", seq="—" if rid is None else label(rid)), icon=":material/add:")
        if self.key("add_error") in state:
            self.show_request_error(state.pop(self.key("add_error")))
        for _spec, err in demo.rejected:
            self.show_request_error(err)
        if self.key("failure") in state:
            code, message = state.pop(self.key("failure"))
            show_error(self.ctx, t(f"engine.err_{code}", message=message), t(f"engine.fix_{code}"))
