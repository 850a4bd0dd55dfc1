"""ui.links: a share link opened by several sessions is replayed once and copied; every copy is exactly the replay's
state, and what one session does (steps, Backs, adds) changes neither the kept replay nor another session's copy."""

from __future__ import annotations

import json

import pytest

import ui.links as links
from lessons.engine import EngineLesson
from lessons.engine_requests import DemoConfig, RequestSpec
from helpers import tiny_model

SPECS = [RequestSpec("hello paged world", max_tokens=40), RequestSpec("1 2 3", "continue", max_tokens=30, at_step=5)]


def _state(lesson: EngineLesson) -> str:
    def untimed(obj):
        if isinstance(obj, dict):
            return {k: untimed(v) for k, v in obj.items() if k != "elapsed_ms"}
        return [untimed(v) for v in obj] if isinstance(obj, list) else obj
    return json.dumps({"trace": untimed(lesson.trace()), "rows": [vars(r) for r in lesson.rows()],
                       "history": [vars(h) for h in lesson.history]}, default=str, sort_keys=True)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(hidden_size=32, num_hidden_layers=1)


def test_two_sessions_share_one_replay_and_stay_apart(tiny, monkeypatch):
    """Two opens of one link (40 steps) replay it once; each copy equals EngineLesson.start; stepping and Backing
    one copy leaves the other and a third open unchanged, and its Back still equals a fresh replay."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=40)
    links._kept.clear()
    starts = []
    real = EngineLesson.start.__func__
    counted = classmethod(lambda cls, *a, **k: starts.append(a[2]) or real(cls, *a, **k))
    monkeypatch.setattr(EngineLesson, "start", counted)
    a = links.open_link(config, SPECS, 40, model, tok)
    b = links.open_link(config, SPECS, 40, model, tok)
    assert starts == [0], "the link was replayed more than once (or not step by step)"
    reference = _state(EngineLesson.replay(config, SPECS, 40, model, tok))
    assert _state(a) == _state(b) == reference and a is not b
    for _ in range(3):
        a.forward()
    a.back()
    a.add(RequestSpec("abc", max_tokens=4, at_step=len(a.steps)))
    a.back()
    assert _state(b) == reference and _state(links.open_link(config, SPECS, 40, model, tok)) == reference
    assert _state(a) == _state(EngineLesson.replay(config, a.all_specs(), len(a.steps), model, tok))
    assert a._rewind is not b._rewind and len(b._rewind) == len(links._kept(config, tuple(SPECS), 40,
                                                                        (id(model), id(tok)), model, tok)._rewind)


def test_a_short_link_is_replayed_directly_and_equals_start(tiny):
    """Below CACHE_FROM_STEPS a link is simply replayed (paced, under the lock): the same state as start()."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=40)
    got = links.open_link(config, SPECS, 7, model, tok)
    assert _state(got) == _state(EngineLesson.start(config, SPECS, 7, model, tok)) and len(got.steps) == 7


def test_a_long_link_replay_is_paced_after_its_first_steps(tiny, monkeypatch):
    """A 40-step link sleeps after each step past the first CACHE_FROM_STEPS (PACE x the step's time), never
    before: 8 sleeps, each positive; the state is still start()'s."""
    model, tok = tiny
    slept = []
    monkeypatch.setattr(links.time, "sleep", slept.append)
    config = DemoConfig(block_size=4, num_blocks=40)
    got = links._replayed(config, SPECS, 40, model, tok)
    assert len(slept) == 40 - links.CACHE_FROM_STEPS and all(s > 0 for s in slept)
    assert _state(got) == _state(EngineLesson.start(config, SPECS, 40, model, tok))
