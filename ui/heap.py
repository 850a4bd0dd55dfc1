"""What Python's garbage collector scans: everything imported leaves its view, so its full collections stay short.

A full (generation 2) collection walks every object the collector tracks, holding the interpreter while it does: with
the libraries the pages import on their first visit (torch's compiler stack, sympy, pandas, transformers, vllm: ~460k
objects) one took 340-620 ms, a pause every learner's click on the server waits behind, and churning sessions
(tabs opened and closed) trigger one every few seconds. ui/page.py freezes what is loaded when it is first imported
(`gc.freeze()`: those objects are never scanned again); `freeze_new_imports()`, called at the end of a server run,
freezes again whenever at least FREEZE_AFTER_MODULES modules were imported since the last freeze, so a full
collection later scans only the sessions' own objects (~1k per engine session: well under a millisecond).

Learners who left. A departed learner's lesson (engine, checkpoints, trace) is reference cycles:
once Streamlit drops the session (server.disconnectedSessionTTL after the tab closed), only a full
collection frees it, and on a quiet server the automatic collector may not run one for a long time,
while a new class allocates fresh memory on top. `collect_departed()`, called at the end of a server
run, runs a full collection and glibc's malloc_trim (free heap pages back to the OS) when a session
held at an earlier look is gone, at most once every COLLECT_EVERY_S (tests/app/test_memory_waves.py).

The cost: the objects alive at a freeze are never collected as cyclic garbage, the learners' state of that moment
included. Freezes happen only while pages import for the first time in the process (about one per page, early),
each after a full collection, so what can stay behind is bounded by the sessions alive at those few moments.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading
import time

import streamlit as st

FREEZE_AFTER_MODULES = 20  # newly imported modules that make a freeze worth its full collection


COLLECT_EVERY_S = 10.0  # a full collection for departed learners at most this often


class _Frozen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.modules = 0  # len(sys.modules) at the last freeze
        self.sessions: set[str] = set()  # session ids held at the last look (collect_departed)
        self.collected = -COLLECT_EVERY_S  # time.monotonic() of the last collect_departed collection


@st.cache_resource(show_spinner=False)
def _frozen() -> _Frozen:
    return _Frozen()


def freeze_new_imports(min_new: int = FREEZE_AFTER_MODULES) -> bool:
    """Collect, then freeze every tracked object, when at least `min_new` modules were imported since the last
    freeze of this process (module docstring); returns whether it froze. Cheap otherwise (a length compared)."""
    state = _frozen()
    if len(sys.modules) - state.modules < min_new:
        return False
    with state.lock:
        if len(sys.modules) - state.modules < min_new:
            return False
        gc.collect()
        gc.freeze()
        state.modules = len(sys.modules)
    return True


def _malloc_trim() -> None:
    """glibc's malloc_trim(0): free heap pages back to the OS (nothing where there is no glibc)."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


def collect_departed(sessions: set[str], now: float | None = None) -> bool:
    """Given the ids of the sessions the process holds now: a full collection and malloc_trim when
    one held at an earlier look is gone and the last such collection is COLLECT_EVERY_S old (module
    docstring); returns whether it collected. Else cheap (a set difference; the departed stay owed).

    Raises: nothing."""
    state, now = _frozen(), time.monotonic() if now is None else now
    with state.lock:
        departed = state.sessions - sessions
        if not departed or now - state.collected < COLLECT_EVERY_S:
            state.sessions = set(sessions) | departed
            return False
        state.sessions, state.collected = set(sessions), now
    gc.collect()
    _malloc_trim()
    return True
