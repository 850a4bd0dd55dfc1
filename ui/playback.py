"""The playback bar of every stepping page: Back, Step, Play / Pause at a speed, keyboard shortcuts (→ step, ← back,
space play / pause), and a step counter; in presenter mode a large counter and one line on what the last step did.

    stepper = Stepper("batch", step_key="batch.decode", position=len(demo.ops),
                      can_forward=True, can_back=bool(demo.ops), forward=decode_once, back=undo_last)
    bar = playback_bar(ctx, knobs, stepper)   # before anything the step changes is drawn
    bar.row.button(…)                          # the page's own buttons go in the same row
    bar.say(text)                              # what the last step did (shown in presenter mode)

`forward` and `back` run in callbacks, before the next run of the page draws anything; they read the page's state
from st.session_state (never from this run's locals) and return whether they changed something.

Every click on the bar's buttons and every shortcut goes through the click ledger (ui/ledger.py): none is lost when
Streamlit cuts a run short, none is replayed after a reconnect, and a burst's work is bounded. A page's other buttons
that must not be lost (`Stepper.extra`: Add on pages 4 and 6) and its Export are logged there too.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

import streamlit as st

from .ledger import act, draw_ledger, start_run
from .page import PageContext
from .params import Knobs

SPEEDS = ("0.5", "1", "2", "4")             # steps per second (strings: they round-trip through the URL as typed)
SHORTCUTS = {"step": "ArrowRight", "back": "ArrowLeft", "play": "Space"}


@dataclass
class Stepper:
    """What a page's playback bar drives (see the module docstring)."""

    prefix: str                    # the page's key prefix: its bar's keys are <prefix>.back, .play_pause, .speed, .ledger
    step_key: str                  # the key of the page's step button (kept from before the bar
    #                                existed); labelled classroom.step on every page: one name
    position: int                  # steps taken so far (the counter)
    can_forward: bool
    can_back: bool
    forward: Callable[[], bool]    # one step; False when nothing could be done (playing stops)
    back: Callable[[], bool]       # undo the last step; False when there was none
    total: int | None = None       # steps there are in all, when known (the counter shows "7 / 10")
    extra: Mapping[str, Callable[[], object]] = field(default_factory=dict)  # button key -> its action (Add)


@dataclass
class Bar:
    """The drawn bar: `row` takes the page's own buttons; `say` fills the presenter's line."""

    row: object
    line: object
    present: bool

    def say(self, text: str) -> None:
        """Markdown, like the page's own messages (the presenter's CSS sets it large)."""
        if self.present and self.line is not None:
            self.line.markdown(text)

    def tell(self, text: str, box: Callable[..., object], icon: str | None = None) -> None:
        """What the last step did, shown once: in presenter mode on the bar's line (`say`), else in
        the page's own message `box` (st.success, st.info, st.caption, …) with `icon`. Raises: nothing."""
        if self.present and self.line is not None:
            self.line.markdown(text)
        elif icon is None:
            box(text)
        else:
            box(text, icon=icon)



def playback_bar(ctx: PageContext, knobs: Knobs, stepper: Stepper, where=None) -> Bar:
    """Draw the bar (see the module docstring), in container `where` when given (presenter mode's
    key-figure slot, ui.page.key_figure_slot); `play` and `speed` are knobs, so they round-trip
    through the URL."""
    with where if where is not None else contextlib.nullcontext():
        return _playback_bar(ctx, knobs, stepper)


def _playback_bar(ctx: PageContext, knobs: Knobs, stepper: Stepper) -> Bar:
    p, t = stepper.prefix, ctx.t
    session = start_run(stepper)  # the ledger's part of each run: before anything is drawn
    playing = bool(knobs.state("play", 0, lambda text: {"0": 0, "1": 1}.get(str(text).strip())))
    if playing and not stepper.can_forward:
        knobs.set_state("play", 0)
        playing = False
    counter = (t("classroom.step_counter_of", step=stepper.position, total=stepper.total)
               if stepper.total is not None else t("classroom.step_counter", step=stepper.position))
    line = None
    if ctx.present:
        top = st.container(horizontal=True, vertical_alignment="center", gap="medium")
        top.markdown(f"<div class='paged-counter'>{counter}</div>", unsafe_allow_html=True)
        line = top.container(key=f"paged_say_{p}").empty()  # one line, replaced if said twice
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", key=f"{p}.bar")
    row.button(t("classroom.back"), key=f"{p}.back", icon=":material/skip_previous:", on_click=act,
               args=(p, "back"), disabled=not stepper.can_back, help=t("classroom.back_help"),
               shortcut=SHORTCUTS["back"])
    row.button(t("classroom.step"), key=stepper.step_key, type="primary", icon=":material/skip_next:", on_click=act,
               args=(p, "step"), disabled=not stepper.can_forward, help=t("classroom.step_help"),
               shortcut=SHORTCUTS["step"])
    row.button(t("classroom.pause") if playing else t("classroom.play"), key=f"{p}.play_pause",
               icon=":material/pause:" if playing else ":material/play_arrow:", on_click=act, args=(p, "play"),
               disabled=not (playing or stepper.can_forward), help=t("classroom.play_help"),
               shortcut=SHORTCUTS["play"])
    speed = knobs.select(t("classroom.speed"), "speed", "1", SPEEDS, where=row, label_visibility="collapsed",
                         format_func=lambda s: speed_text(t, s), width=140)
    if not ctx.present:
        row.markdown(f"**{counter}**")
    draw_ledger(stepper, {f"{p}.back": "back", stepper.step_key: "step", f"{p}.play_pause": "play"},
                {"ArrowRight": "step", "ArrowLeft": "back", " ": "play"}, playing=playing,
                interval_ms=int(1000 / float(speed)), session=session)
    return Bar(row, line, ctx.present)


def speed_text(t, speed: str) -> str:
    """A playback speed as the menu shows it: "1 step/s", "2 steps/s", in the page's language
    (t: its translator). Raises ValueError for a speed that is not a number."""
    key = "classroom.speed_value_one" if float(speed) == 1 else "classroom.speed_value"
    return t(key, speed=speed)
