"""The playback bar's click ledger (ui.playback draws the bar with it): each click on the bar's buttons, on a page's
other logged buttons and each shortcut runs exactly once, in order, however Streamlit's runs are cut short.

    session = start_run(stepper)     # first in each run of the bar, before it draws anything
    row.button(…, on_click=act, args=(prefix, "step"))       # the bar's buttons, where the script is not running
    draw_ledger(stepper, buttons, keys, playing, interval_ms, session)   # the browser script, after the buttons

No lost clicks. Streamlit drops clicks that come faster than its reruns: each click starts a new run and stops the
one in flight, and a run stopped before it handled its click forgets it (a trigger is one-shot). So in the browser
every click on the bar's buttons, and every shortcut, is caught first by a small script (the "ledger", a
st.components.v2 component, ui/ledger.js) that appends it to a numbered log and sends the whole log as the component's value.
A value is not a trigger: the newest one always arrives, whatever runs were cut short, and `apply_log` runs each
logged action exactly once, in order. An action can itself be cut short: a whole-page rerun (a knob, a button outside
the step fragment, a ledger value on a page without one) stops the run at its next st.session_state access, callbacks
included. An action recorded as applied and stopped so would be lost; Export (whose file is queued at its last
session_state access, so a stopped press did nothing) is therefore handed back to the next value (`retry`).
Where the script is not running (AppTest, the first moment after a page load) the buttons' own on_click callbacks do
the same actions.

A page's other buttons that must not be lost either (pages 4 and 6: Add, pressed while the page plays) are given to
the bar as `Stepper.extra`: the ledger logs their clicks the same way, under the button's key, and runs each once.
Every page's Export (key "<prefix>.export", ui.export) is logged so without being named: `export_key(prefix)`.
Playing goes on. Such a button may sit outside the step fragment (the Add form does): after running it, the bar
reruns the whole page, as the button's own click would have.

No replayed clicks. The log lives in the browser page, and a page outlives its server session (the server restarted,
the replica behind the proxy died, the session outlived the disconnect timeout): the tab reconnects to a fresh session
that has applied nothing, and the log it sends holds every click made for the old one. So each session has a random
token, sent to the script with the bar's data; when the script meets a token it has not seen, it notes the log's
seq at that moment as the session's `base`, and sends (token, base) with every value. A session that meets a page's
nonce for the first time counts everything up to `base` as applied (made for another session) — and, for a value
that does not carry its own token (sent before the page knew of it), everything in the log. The state a fresh session
shows is what the URL names (the knobs), never the old log replayed on top of it.

Bounded work. One value runs at most MAX_PER_MESSAGE new actions (the rest are counted as applied and dropped): a
hand-made value of 128 Backs costs what 16 do. Past the first FREE_ACTIONS of a value, each action is followed by a
sleep of PACE times its duration: a burst no hand makes holds the interpreter only a third of the time, and the other
learners' runs go on in the gaps; and before each action but the first it gives way to another learner's run under
way (ui.capacity.yielding_run, at most GIVE_WAY_S each).
"""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Mapping

import streamlit as st
from streamlit.runtime.scriptrunner import RerunException, StopException

if TYPE_CHECKING:
    from .playback import Stepper

ACTIONS = ("step", "back", "play", "tick")  # what the ledger may log
MAX_LOG = 128                               # actions the ledger keeps (far more than clicks during one run)
APPLIED_KEY = "_ledger_applied"             # nonce of a browser page -> last action applied from its log
SESSION_KEY = "_ledger_session"             # this server session's random token (see "No replayed clicks")
MAX_PER_MESSAGE = 16                        # new actions one ledger value may run (ten quick clicks are ten)
FREE_ACTIONS, PACE = 4, 2.0                 # actions of one value run unpaced; later ones sleep PACE x their time
GIVE_WAY_S = 0.5                            # before each of its actions but the first, a value waits at most this
#                                             long while another learner's run is under way (ui.capacity)
LOCK_KEY = "_playback_lock"  # one per session: a new run's callbacks wait for an interrupted run's to finish
WHOLE_PAGE_KEY = "_playback_whole_page"  # set when the ledger ran an extra button: the next run draws the whole page

# the browser side, in its own file (%-formatted: "%%" there is a literal "%")
LEDGER_JS = (Path(__file__).with_name("ledger.js")).read_text(encoding="utf-8") % {"max_log": MAX_LOG}

_component = st.components.v2.component("paged_ledger", js=LEDGER_JS)


def export_key(prefix: str) -> str:
    """The key of page `prefix`'s Export button, which the bar's ledger logs like an extra button.

    Raises: nothing."""
    return f"{prefix}.export"


def _logged_extra(stepper: Stepper) -> tuple[str, ...]:
    """The keys of the page's other logged buttons: its `extra` and its Export.

    Raises: nothing."""
    return (*stepper.extra, export_key(stepper.prefix))


def _seq(entry) -> int | None:
    """The seq of a well-formed log entry [seq, action, page] (a positive int, not a bool), else None."""
    if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], int) and not isinstance(entry[0], bool):
        return entry[0]
    return None


def apply_log(value, applied: dict[str, int], do: Callable[[str], None], page: str,
              extra: Collection[str] = (), session: str | None = None, retry: Collection[str] = ()) -> int:
    """Run, in order, each action of a ledger value {"nonce", "seq", "log": [[seq, action, page], …], "session",
    "base"} that is newer than applied[nonce] and was logged on `page`; record the newest seen. An action is one of
    ACTIONS or of `extra` (the keys of the page's other logged buttons). A nonce met for the first time starts at the
    value's `base` when the value carries this session's token `session`, else at the newest seq of its log: a
    fresh session never replays clicks made for another (module docstring). At most MAX_PER_MESSAGE actions run;
    newer ones in the same value are recorded as applied and dropped. Anything malformed (it comes from the browser)
    is skipped, and so is an action logged on another page (clicked just before leaving it). An action in `retry`
    that a newer run stops (Streamlit's RerunException / StopException out of `do`) counts as not applied: the next
    value runs it (only for actions that change nothing before their last session_state access). Returns the
    number of actions run."""
    if not isinstance(value, dict) or not isinstance(value.get("nonce"), str) or len(value["nonce"]) > 64:
        return 0
    log = value.get("log")
    if not isinstance(log, list):
        return 0
    log = log[-MAX_LOG:]
    nonce, ran = value["nonce"], 0
    if nonce not in applied:
        base = value.get("base")
        if (session is not None and value.get("session") == session and isinstance(base, int)
                and not isinstance(base, bool)):
            applied[nonce] = max(0, base)
        else:
            applied[nonce] = max([s for s in map(_seq, log) if s is not None], default=0)
    for entry in log:
        seq = _seq(entry)
        if seq is None or seq <= applied[nonce]:
            continue
        applied[nonce] = seq  # recorded before the action runs: an action is never run twice
        if (entry[1] in ACTIONS or isinstance(entry[1], str) and entry[1] in extra) and entry[2] == page \
                and ran < MAX_PER_MESSAGE:
            try:
                do(entry[1])
            except (RerunException, StopException):
                if entry[1] in retry:  # stopped before it did anything: the run that stopped it runs it again
                    applied[nonce] = seq - 1
                raise
            ran += 1
    return ran


def _session_lock():
    """The session's playback lock. Streamlit starts a new run on each click without waiting for the run it stops
    (that one stops only at its next Streamlit call), so two runs' callbacks could otherwise step the same demo at
    once, or apply the same logged click twice."""
    return st.session_state.get(LOCK_KEY) or threading.RLock()


def act(prefix: str, action: str) -> None:
    """One action on the page `prefix` with the Stepper of its last run: step / back pause playing; play toggles it
    (not at the end); a tick steps only while playing, and stops playing at the end."""
    with _session_lock():
        _act(prefix, action)


def _act(prefix: str, action: str) -> None:
    stepper: Stepper | None = st.session_state.get(f"_stepper.{prefix}")
    if stepper is None:
        return
    play_key = f"{prefix}.play"
    playing = bool(st.session_state.get(play_key))
    if action == "step":
        st.session_state[play_key] = 0
        stepper.forward()
    elif action == "back":
        st.session_state[play_key] = 0
        stepper.back()
    elif action == "play":
        st.session_state[play_key] = 0 if playing else 1
    elif action == "tick" and playing and not stepper.forward():
        st.session_state[play_key] = 0
    elif action in stepper.extra:  # (playing goes on)
        stepper.extra[action]()
        st.session_state[WHOLE_PAGE_KEY] = True
    elif action == export_key(prefix):  # the ledger already gave way to other learners before this action
        from .export import press

        st.session_state[WHOLE_PAGE_KEY] = True  # the Export button may sit outside the step fragment; set
        press(action, give_way=lambda max_s: 0.0)  # first: the press queues its file at its last state access


def paced(do: Callable[[str], None], free: int = FREE_ACTIONS, pace: float = PACE,
          give_way: Callable[[], object] | None = None) -> Callable[[str], None]:
    """`do`, which after its first `free` calls sleeps `pace` times each call's duration (see "Bounded work"), and
    before every call but the first calls `give_way()` (the ledger waits there for another learner's run)."""
    calls = 0

    def run(action: str) -> None:
        nonlocal calls
        if calls and give_way is not None:
            give_way()
        began = time.perf_counter()
        do(action)
        calls += 1
        if calls > free:
            time.sleep(pace * (time.perf_counter() - began))
    return run


def _on_ledger(prefix: str) -> None:
    from .capacity import yielding_run

    with _session_lock(), yielding_run() as give_way:  # between two actions, another learner's run goes first
        value = (st.session_state.get(f"{prefix}.ledger") or {}).get("log")
        stepper: Stepper | None = st.session_state.get(f"_stepper.{prefix}")
        act = paced(lambda action: _act(prefix, action), give_way=lambda: give_way(GIVE_WAY_S))
        apply_log(value, st.session_state.setdefault(APPLIED_KEY, {}), act, prefix,
                  _logged_extra(stepper) if stepper is not None else (), session=st.session_state.get(SESSION_KEY),
                  retry=(export_key(prefix),))


def _catch_up(prefix: str) -> None:
    """Run what a stopped action handed back (apply_log's `retry`) when the run that stopped it brought no new
    ledger value (a knob moved), so no ledger callback would run it.

    Raises: what the actions raise."""
    value = (st.session_state.get(f"{prefix}.ledger") or {}).get("log")
    applied = st.session_state.get(APPLIED_KEY) or {}
    if (isinstance(value, dict) and isinstance(value.get("nonce"), str) and isinstance(value.get("seq"), int)
            and applied.get(value["nonce"], value["seq"]) < value["seq"]):
        _on_ledger(prefix)


def _whole_page_if_asked() -> None:
    """After the ledger ran an extra button (whose outcome may be drawn outside the step fragment), a run of the
    fragment alone starts the whole page over instead (it has drawn nothing yet)."""
    if not st.session_state.pop(WHOLE_PAGE_KEY, False):
        return
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    run = get_script_run_ctx()
    if run is not None and run.fragment_ids_this_run:  # a fragment-only run: the form's outcome would not be drawn
        st.rerun(scope="app")


def _css_class(key: str) -> str:
    import re
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip())


def start_run(stepper: Stepper) -> str:
    """What the ledger does first in each run of the bar, before the bar draws anything: run what a
    stopped action handed back, restart a fragment-only run as the whole page when an extra button
    asked for it, make the session's lock and token, and keep `stepper` for the next run's callbacks.
    Returns the session's token (see "No replayed clicks").

    Raises: what the actions run here raise (Streamlit's rerun, to draw the whole page)."""
    _catch_up(stepper.prefix)
    _whole_page_if_asked()
    st.session_state.setdefault(LOCK_KEY, threading.RLock())  # made by a run, before any callback can need it
    session = st.session_state.setdefault(SESSION_KEY, secrets.token_hex(8))
    st.session_state[f"_stepper.{stepper.prefix}"] = stepper  # the callbacks of the next run act with it
    return session


def draw_ledger(stepper: Stepper, buttons: Mapping[str, str], keys: Mapping[str, str], playing: bool,
                interval_ms: int, session: str) -> None:
    """Draw the browser script (a zero-height component keyed "<prefix>.ledger") that logs clicks on
    `buttons` (widget key -> action) and on the page's other logged buttons (`Stepper.extra`, its
    Export), and presses of `keys` (browser key name -> action); while `playing`, it logs a tick every
    `interval_ms`. `session`: start_run's token.

    Raises: nothing."""
    p = stepper.prefix
    _component(key=f"{p}.ledger", height=0, default={"log": None}, on_log_change=lambda: _on_ledger(p),
               data={"buttons": {**{_css_class(k): action for k, action in buttons.items()},
                                 **{_css_class(k): k for k in _logged_extra(stepper)}},
                     "keys": dict(keys), "playing": playing, "interval_ms": interval_ms, "page": p,
                     "session": session})
