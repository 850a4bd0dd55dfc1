"""What Python's garbage collector scans: everything imported leaves its view, so its full collections stay short.

A full (generation 2) collection walks every object the collector tracks, holding the interpreter while it does: with
the libraries the pages import on their first visit (torch's compiler stack, sympy, pandas, transformers, vllm: ~460k
objects) one took 340-620 ms, a pause every learner's click on the server waits behind, and churning sessions
(tabs opened and closed) trigger one every few seconds. ui/page.py freezes what is loaded when it is first imported
(`gc.freeze()`: those objects are never scanned again); `freeze_new_imports()`, called at the end of a server run,
freezes again whenever at least FREEZE_AFTER_MODULES modules were imported since the last freeze, so a full
collection later scans only the sessions' own objects (~1k per engine session: well under a millisecond).

The cost: the objects alive at a freeze are never collected as cyclic garbage, the learners' state of that moment
included. Freezes happen only while pages import for the first time in the process (about one per page, early),
each after a full collection, so what can stay behind is bounded by the sessions alive at those few moments.
"""

from __future__ import annotations

import gc
import sys
import threading

import streamlit as st

FREEZE_AFTER_MODULES = 20  # newly imported modules that make a freeze worth its full collection


class _Frozen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.modules = 0  # len(sys.modules) at the last freeze


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
