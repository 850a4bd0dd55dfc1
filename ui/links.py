"""Opening a share link of pages 4 and 6 (`?reqs=…&steps=N`): the replay to step N is done once per process and
copied for each session that opens the same link, and the replays of different links never run side by side.

A link names its state exactly (config, requests, steps; the model is the page's), so two sessions opening the same
link get the same lesson: the first replays it (`EngineLesson.start`), the finished lesson is kept read-only in
st.cache_resource (a few links, the newest), and each session gets its own copy (lessons.engine_rewind.forked:
~10 ms, sharing the recorded steps and checkpoints). Nothing a session does reaches the kept one.

A replay from step 0 is the costliest thing one visit can ask for (MAX_LINK_STEPS steps, ui.params). Replays hold
one process-wide lock while they run, so five links opened at once queue behind each other instead of sharing the
CPU five ways with every other learner's clicks; and a replay sleeps PACE times as long as each step took, so it
holds the interpreter (the GIL) in short bursts with gaps in which the other sessions' runs go on: a long link opens
more slowly (its first visitor waits ~3x the replay), nobody else's click does.
"""

from __future__ import annotations

import threading
import time

import streamlit as st

from lessons.engine import EngineLesson
from lessons.engine_rewind import forked

CACHED_LINKS = 4        # finished link replays kept for the process
CACHE_FROM_STEPS = 32   # shorter links replay in a few ms: not worth keeping
PACE = 2.0              # a link replay sleeps this many times each step's time (it runs a third of the time at most)


@st.cache_resource(show_spinner=False)
def _replay_lock() -> threading.Lock:
    """One lock for the process (immutable: only acquired and released)."""
    return threading.Lock()


def _replayed(config, specs, steps: int, model, tokenizer) -> EngineLesson:
    """`EngineLesson.start(config, specs, steps, …)`, under the process's replay lock and paced: the same requests
    from step 0 and the same steps one by one (what `start` does), each followed by a sleep of PACE times its
    duration past the first CACHE_FROM_STEPS. A failing step is left to `start` itself, which reports it as it always
    does."""
    with _replay_lock():
        lesson = EngineLesson.start(config, list(specs), 0, model, tokenizer)
        try:
            for done in range(steps):
                began = time.perf_counter()
                if lesson.step() is None:
                    break
                if done >= CACHE_FROM_STEPS:  # a short link costs a few ms: only a long one is paced
                    time.sleep(PACE * (time.perf_counter() - began))
        except (RuntimeError, ValueError):
            lesson = EngineLesson.start(config, list(specs), steps, model, tokenizer)
    return lesson


@st.cache_resource(show_spinner=False, max_entries=CACHED_LINKS)
def _kept(config, specs: tuple, steps: int, model_id: tuple, _model, _tokenizer) -> EngineLesson:
    """The finished replay of one link, kept read-only (model_id: the ids of the model and tokenizer; the kept
    lesson holds both, so no other object takes those ids while the entry lives)."""
    return _replayed(config, specs, steps, _model, _tokenizer)


def open_link(config, specs, steps: int, model, tokenizer) -> EngineLesson:
    """This session's lesson for a link: `EngineLesson.start(config, specs, steps, model, tokenizer)`, the same
    state, from the process's kept replay of that link when there is one (module docstring)."""
    if steps < CACHE_FROM_STEPS:
        return _replayed(config, specs, steps, model, tokenizer)
    kept = _kept(config, tuple(specs), steps, (id(model), id(tokenizer)), model, tokenizer)
    return forked(kept)
