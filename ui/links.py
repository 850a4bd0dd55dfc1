"""Opening a share link of pages 4 and 6 (`?reqs=…&steps=N`): each request set is replayed from
step 0 once per process; every later link of it, at any step, starts from a copy of that replay's
nearest checkpoint.

A link names its state exactly (config, requests, steps; the model is the page's), and the state
at step N of one request set is its state at step M < N stepped on. So the process keeps, per
(config, requests, model), the farthest replay of them so far, read-only ("kept"), with its
checkpoints (lessons.rewind: a copy every 16 steps, sharing the recorded steps). A session that
opens a link of those requests at step N gets its own lesson:

    N <= the kept replay's steps   a copy of the newest checkpoint at or before N, the < 16 steps
                                   after it stepped (lessons.engine_rewind.rewound): about what
                                   opening a link at step 10 costs
    N beyond it                    a copy of the kept replay stepped on to N, then kept instead

Each copy has its own live state and checkpoint store (lessons.engine_rewind.forked), sharing with
the kept replay only what never changes: nothing a session does reaches the kept one or another
session's copy. The kept replays are a least-recently-used store bounded in bytes (KEEP_BYTES of
tensors and generator states, the model's not counted).

A replay (from step 0, or on from a kept one) holds one process-wide lock, so links opened at once
queue instead of sharing the CPU, and before each step it gives way while another learner's run is
under way (ui.capacity.yielding_run, at most GIVE_WAY_S a step): on a quiet server it runs at full
speed, in a busy class the others' clicks go first. The first visit to a new request set still
costs its whole replay (about 1.5 ms a step on a quiet machine, docs/benchmarks.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import streamlit as st

from lessons.engine import EngineLesson
from lessons.engine_rewind import forked, forked_sized, rewound

CACHE_FROM_STEPS = 32  # shorter links replay in a few ms: not worth keeping
# bytes of all kept replays' tensors and generator states (one: at most ~25 MB, rewind.BUDGET_BYTES;
# a steps=300 replay of page 4's demo ~19 MB): room for six of them
KEEP_BYTES = 128 << 20
MAX_KEPT = 16          # request sets kept at most, whatever their size
GIVE_WAY_S = 0.05      # before a replayed step, wait at most this long for another learner's run


class _Kept:
    """The kept replays: key -> a read-only EngineLesson, least recently used first. The lock
    guards the dict; the lessons in it are never changed, only copied."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lessons: OrderedDict[tuple, tuple[EngineLesson, int]] = OrderedDict()  # lesson, bytes

    def get(self, key: tuple) -> EngineLesson | None:
        """The kept replay of `key`, or None."""
        with self.lock:
            found = self.lessons.get(key)
            if found is not None:
                self.lessons.move_to_end(key)
            return found[0] if found else None

    def put(self, key: tuple, lesson: EngineLesson, size: int) -> None:
        """Keep `lesson` (holding `size` tensor bytes) under `key`, replacing a shorter replay of it;
        past KEEP_BYTES or MAX_KEPT the least recently used go first (the newest always stays)."""
        with self.lock:
            self.lessons[key] = (lesson, size)
            self.lessons.move_to_end(key)
            while len(self.lessons) > 1 and (len(self.lessons) > MAX_KEPT
                                             or self.nbytes > KEEP_BYTES):
                self.lessons.popitem(last=False)

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self.lessons.values())

    def clear(self) -> None:
        with self.lock:
            self.lessons.clear()


@st.cache_resource(show_spinner=False)
def _kept() -> _Kept:
    """The process's kept replays (shared by every session: read-only lessons only)."""
    return _Kept()


@st.cache_resource(show_spinner=False)
def _replay_lock() -> threading.Lock:
    """One lock for the process (immutable: only acquired and released)."""
    return threading.Lock()


def _stepped_on(lesson: EngineLesson, steps: int) -> bool:
    """Step `lesson` on to `steps` (or its end), giving way to other learners' runs before each
    step. False when a step fails (the caller then replays with `start`, which reports it)."""
    from .capacity import yielding_run

    with yielding_run() as give_way:
        try:
            while len(lesson.steps) < steps:
                give_way(GIVE_WAY_S)
                if lesson.step() is None:
                    break
        except (RuntimeError, ValueError):
            return False
    return True


def _replayed(config, specs, steps: int, model, tokenizer,
              kept: EngineLesson | None = None) -> EngineLesson:
    """`EngineLesson.start(config, specs, steps, …)`: from a copy of `kept` (the same requests
    replayed to fewer steps) when given, else from step 0, one step at a time. The caller holds the
    replay lock."""
    if kept is not None:
        lesson = forked(kept)
    else:
        lesson = EngineLesson.start(config, list(specs), 0, model, tokenizer)
    if lesson.news.get("failure") or not _stepped_on(lesson, steps):
        lesson = EngineLesson.start(config, list(specs), steps, model, tokenizer)
    return lesson


def _from_kept(kept: EngineLesson | None, steps: int) -> EngineLesson | None:
    """A session's own lesson at `steps` from `kept` when it reaches that far (or ended before);
    None when it does not, or a step fails."""
    if kept is None or (steps > len(kept.steps) and kept.can_step()):
        return None
    if steps >= len(kept.steps):
        return forked(kept)
    return rewound(forked(kept), steps)


def open_link(config, specs, steps: int, model, tokenizer) -> EngineLesson:
    """This session's lesson for a link: the state `EngineLesson.start(config, specs, steps, model,
    tokenizer)` builds, from the process's kept replay of those requests when there is one."""
    if steps < CACHE_FROM_STEPS:
        with _replay_lock():
            return _replayed(config, specs, steps, model, tokenizer)
    store, key = _kept(), (config, tuple(specs), id(model), id(tokenizer))
    lesson = _from_kept(store.get(key), steps)  # no lock: a copy and fewer than 16 steps
    if lesson is not None:
        return lesson
    with _replay_lock():
        kept = store.get(key)  # another session may have replayed them while this one waited
        lesson = _from_kept(kept, steps)
        if lesson is not None:
            return lesson
        lesson = _replayed(config, specs, steps, model, tokenizer, kept)
        if not lesson.news.get("failure") and len(lesson.steps) > len(kept.steps if kept else ()):
            store.put(key, *forked_sized(lesson))
    return lesson
