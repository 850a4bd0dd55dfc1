"""How many learners one server holds: beyond PAGED_MAX_SESSIONS sessions at once, a new one gets a clear "server
full" page (both languages, a Try again button) instead of the app, so the learners already in keep quick clicks.

A session is admitted on its first run when fewer than the limit are admitted and still connected, and stays
admitted for its life (a rerun or a page change never shows it the full page). Who is connected comes from
Streamlit's runtime; where there is none (AppTest, bare `python`), nobody is refused. The admitted ids are kept in
one process-wide set behind a lock (st.cache_resource): the only state shared across sessions, and it holds ids only.

A new session's runs up to its first page (the "server full" page's included) go through `first_run_paced`:
one newcomer at a time in the process; the next waits NEW_SESSION_PACE times the CPU the last one took (at most
MAX_PACE_S); and a newcomer's run gives way to the learners already in: before it starts and before each element
it sends, it waits while an established session's run (a click, a fragment, a page change) is under way, for
MAX_YIELD_S in all at most, so it goes on in the gaps between theirs instead of sharing the interpreter with them.
A tab closed while it queued is not drawn. `yielding_run` gives a long action of an admitted session (Run to end)
the same way of giving way between its steps. Who is running comes from Streamlit's sessions (their app state);
the process-wide sets of newcomers and long runners hold ids only.

Measured with `python -m ui.bench attack --attack sessions` (45 tabs opened and closed without pause, one victim
stepping page 4): the victim's p95 rose 15-25x before (each new tab cost ~0.5 s of the server's event loop in
Streamlit's file watcher, now off in .streamlit/config.toml, and full garbage collections of 340-620 ms, ui.heap),
and 1.4x after (docs/learner-state.md).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import streamlit as st

DEFAULT_MAX_SESSIONS = 40  # ~40 MB each at step 600 of the engine page (checkpoints included): ~1.6 GB in all
ENV = "PAGED_MAX_SESSIONS"
ADMITTED_KEY = "_capacity_admitted"
FIRST_RUN_KEY = "_capacity_first_run_done"
NEW_SESSION_PACE = 1.0  # after a new session's first run, the next newcomer waits this many times its CPU time
MAX_PACE_S = 0.5  # ...but never longer than this (the process's very first run imports and loads for seconds)
MAX_YIELD_S = 3.0  # a newcomer's run gives way to established learners' runs for at most this long in all
YIELD_POLL_S = 0.002  # how often a newcomer giving way looks again


def max_sessions() -> int:
    """PAGED_MAX_SESSIONS (a whole number >= 1), else DEFAULT_MAX_SESSIONS. ValueError naming the bad value and the
    rule when it is set to anything else (the operator's typo must not silently lift the limit)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_SESSIONS
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{ENV}={raw!r}: it must be a whole number of sessions, at least 1")
    return int(raw)


class _Admitted:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: set[str] = set()


@st.cache_resource(show_spinner=False)
def _admitted() -> _Admitted:
    return _Admitted()


class _Gate:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # held by the one newcomer's run under way
        self.free_at = 0.0  # time.monotonic() before which no newcomer's run starts
        self.ids_lock = threading.Lock()
        self.newcomers: set[str] = set()  # sessions queued at the gate or running their first run (ids only)
        self.runners: set[str] = set()  # sessions in a long action that gives way (Run to end: yielding_run)

    def yielding(self) -> frozenset[str]:
        """The sessions that give way to others (newcomers and long runners): never waited for themselves."""
        with self.ids_lock:
            return frozenset(self.newcomers | self.runners)


@st.cache_resource(show_spinner=False)
def _gate() -> _Gate:
    return _Gate()


def _wait(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


def _sessions() -> list | None:
    """The connected sessions (Streamlit's AppSession objects); None without a real runtime (as _connected_ids)."""
    from streamlit import runtime

    if not runtime.exists():
        return None
    active = getattr(getattr(runtime.get_instance(), "_session_mgr", None), "list_active_sessions", None)
    return [info.session for info in active()] if callable(active) else None


def serves_sessions() -> bool:
    """Whether this run is served by a real Streamlit server that can list its sessions (not AppTest)."""
    return _sessions() is not None


def established_run_busy(yielding: frozenset[str] | set[str]) -> bool:
    """Whether a learner already in (a connected session not among the `yielding` ids: newcomers, long runners) has
    a run under way: a click, a fragment's rerun, a page change. False without a runtime that can say."""
    from streamlit.runtime.app_session import AppSessionState

    for session in _sessions() or ():
        if session.id not in yielding and getattr(session, "_state", None) == AppSessionState.APP_IS_RUNNING:
            return True
    return False


class _Yielder:
    """Gives way to established learners' runs, for at most MAX_YIELD_S in all over one newcomer's run (then the
    newcomer goes on regardless: a class clicking without pause must not shut newcomers out)."""

    def __init__(self, gate: _Gate) -> None:
        self.gate, self.left = gate, MAX_YIELD_S

    def __call__(self) -> None:
        while self.left > 0 and established_run_busy(self.gate.yielding()):
            _wait(YIELD_POLL_S)
            self.left -= YIELD_POLL_S


@contextmanager
def _checkpoints(give_way: _Yielder) -> Iterator[None]:
    """While the body runs, every element this run sends first gives way (give_way()): a newcomer's first run goes
    on in the gaps between established runs instead of sharing the interpreter with them. Streamlit's per-run
    context sends each element through its `_enqueue`; without one (another Streamlit), no checkpoints."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    send = getattr(ctx, "_enqueue", None)
    if ctx is None or not callable(send):
        yield
        return

    def paced_send(msg) -> None:
        give_way()
        send(msg)

    ctx._enqueue = paced_send
    try:
        yield
    finally:
        ctx._enqueue = send


@contextmanager
def yielding_run() -> Iterator[Callable[[float], float]]:
    """Around a long action of an admitted session (Run to end): yields `give_way(max_s)`, to call between its
    steps, which waits while another learner's run is under way, up to `max_s`, and returns the seconds waited.
    Two long actions never wait for each other (each is among the yielding ones), nor for a newcomer."""
    gate, me = _gate(), _this_session() or ""
    with gate.ids_lock:
        gate.runners.add(me)

    def give_way(max_s: float) -> float:
        waited = 0.0
        while waited < max_s and established_run_busy(gate.yielding()):
            _wait(YIELD_POLL_S)
            waited += YIELD_POLL_S
        return waited

    try:
        yield give_way
    finally:
        with gate.ids_lock:
            gate.runners.discard(me)


def _waiting_note(ahead: int):
    """A line saying the page is opening behind others, shown while this newcomer queues (None: no wait to speak
    of). Cleared once its turn comes."""
    if ahead < 1:
        return None
    from .page import current_lang
    from .strings import t

    note = st.empty()
    note.caption(t("capacity.waiting", current_lang(), ahead=ahead))
    return note


@contextmanager
def first_run_paced() -> Iterator[None]:
    """Around a run of the app: a new session's runs until it is admitted and has drawn its first page (the
    "server full" page's included) wait their turn (module docstring); every later run, and every run without a
    real Streamlit runtime (AppTest), goes straight on."""
    if st.session_state.get(FIRST_RUN_KEY) or _connected_ids() is None:
        yield
        return
    gate, me = _gate(), _this_session() or ""
    with gate.ids_lock:
        ahead = len(gate.newcomers)
        gate.newcomers.add(me)
    try:
        note = _waiting_note(ahead)
        with gate.lock:
            _wait(gate.free_at - time.monotonic())
            if note is not None:
                note.empty()
            connected = _connected_ids()
            if connected is not None and me not in connected:  # the tab closed while it queued: nothing to draw
                st.stop()
            give_way = _Yielder(gate)
            give_way()
            began = time.thread_time()
            try:
                with _checkpoints(give_way):
                    yield
            finally:
                if st.session_state.get(ADMITTED_KEY):
                    st.session_state[FIRST_RUN_KEY] = True
                # the next newcomer waits NEW_SESSION_PACE times the CPU this run took (its waits not counted)
                pace = min(MAX_PACE_S, NEW_SESSION_PACE * (time.thread_time() - began))  # a cold one: capped
                gate.free_at = time.monotonic() + pace
    finally:
        with gate.ids_lock:
            gate.newcomers.discard(me)


def _connected_ids() -> set[str] | None:
    """Ids of the sessions with a browser connected now; None without a Streamlit runtime that can say (AppTest's
    stands-in runtime cannot)."""
    from streamlit import runtime

    if not runtime.exists():
        return None
    manager = getattr(runtime.get_instance(), "_session_mgr", None)
    active = getattr(manager, "list_active_sessions", None)
    if not callable(active):
        return None
    return {info.session.id for info in active()}


def session_ids() -> set[str]:
    """Ids of the sessions the process holds now, connected or kept for a reconnect (none without a
    runtime).

    Raises: nothing."""
    from streamlit import runtime

    if not runtime.exists():
        return set()
    manager = getattr(runtime.get_instance(), "_session_mgr", None)
    listed = getattr(manager, "list_sessions", None)
    return {info.session.id for info in listed()} if callable(listed) else set()


def _this_session() -> str | None:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def admit(limit: int) -> bool:
    """Whether this session may use the app (module docstring)."""
    if st.session_state.get(ADMITTED_KEY):
        return True
    connected, me = _connected_ids(), _this_session()
    if connected is None or me is None:
        return True
    store = _admitted()
    with store.lock:
        store.ids &= connected  # gone ones free their place
        if me not in store.ids and len(store.ids) >= limit:
            return False
        store.ids.add(me)
    st.session_state[ADMITTED_KEY] = True
    return True


def admit_or_stop() -> None:
    """Call first in app.py: the app for an admitted session, else the "server full" page and the run stops."""
    from .page import current_lang
    from .strings import t

    try:
        limit = max_sessions()
    except ValueError as err:  # the operator's setting, named: the app does not start around it
        st.error(str(err), icon=":material/error:")
        st.stop()
    if admit(limit):
        return
    lang = current_lang()
    st.set_page_config(page_title=t("capacity.title", lang), page_icon=":material/group_off:")
    st.title(t("capacity.title", lang))
    st.info(t("capacity.text", lang, max_sessions=limit), icon=":material/group_off:")
    st.button(t("capacity.retry", lang), icon=":material/refresh:", key="capacity.retry")
    st.caption(t("capacity.operator", lang, default=DEFAULT_MAX_SESSIONS))
    st.stop()
