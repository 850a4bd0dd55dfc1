"""ui.links: a share link opened by several sessions is replayed once and copied; every copy is exactly the replay's
state, and what one session does (steps, Backs, adds) changes neither the kept replay nor another session's copy;
a link of the same requests at another step starts from the kept replay's checkpoints (steps counted)."""

from __future__ import annotations

import json

import pytest

import ui.links as links
from lessons.engine import EngineLesson
from lessons.engine_requests import DemoConfig, RequestSpec
from helpers import generator_state_bytes, tensor_bytes, tiny_model

SPECS = [RequestSpec("hello paged world", max_tokens=40), RequestSpec("1 2 3", "continue", max_tokens=30, at_step=5)]
LONG = [RequestSpec("hello paged world", max_tokens=100), RequestSpec("1 2 3", "continue", max_tokens=60, at_step=20)]


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


def _counting_steps(monkeypatch) -> list[int]:
    """Every EngineLesson.step from now on appends 1 to the returned list (work counted, not timed)."""
    counted = []
    real = EngineLesson.step
    monkeypatch.setattr(EngineLesson, "step", lambda self: counted.append(1) or real(self))
    return counted


def test_two_sessions_share_one_replay_and_stay_apart(tiny, monkeypatch):
    """Two opens of one link (40 steps) replay it once; each copy equals EngineLesson.start; stepping and Backing
    one copy leaves the other and a third open unchanged, and its Back still equals a fresh replay."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=40)
    links._kept().clear()
    counted = _counting_steps(monkeypatch)
    a = links.open_link(config, SPECS, 40, model, tok)
    b = links.open_link(config, SPECS, 40, model, tok)
    assert len(counted) == 40, "the link was replayed more than once (or not step by step)"
    monkeypatch.undo()
    reference = _state(EngineLesson.replay(config, SPECS, 40, model, tok))
    assert _state(a) == _state(b) == reference and a is not b
    for _ in range(3):
        a.forward()
    a.back()
    a.add(RequestSpec("abc", max_tokens=4, at_step=len(a.steps)))
    a.back()
    assert _state(b) == reference and _state(links.open_link(config, SPECS, 40, model, tok)) == reference
    assert _state(a) == _state(EngineLesson.replay(config, a.all_specs(), len(a.steps), model, tok))
    kept = links._kept().get((config, tuple(SPECS), id(model), id(tok)))
    assert a._rewind is not b._rewind and kept is not None and len(b._rewind) == len(kept._rewind)


def test_a_link_of_kept_requests_at_another_step_costs_a_few_steps(tiny, monkeypatch):
    """After one visit at step 60, a link of the same requests at step 40 steps at most 15 times (from the kept
    replay's checkpoint at 32) and one at 70 at most 10 (on from the kept 60, which step 70 then replaces): each
    equals EngineLesson.start at its step; a link of other requests replays from step 0."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=64)
    links._kept().clear()
    links.open_link(config, LONG, 60, model, tok)
    counted = _counting_steps(monkeypatch)
    at_40 = links.open_link(config, LONG, 40, model, tok)
    assert len(counted) <= 15
    counted.clear()
    at_70 = links.open_link(config, LONG, 70, model, tok)
    assert len(counted) == 10
    counted.clear()
    again_65 = links.open_link(config, LONG, 65, model, tok)
    assert len(counted) <= 15
    counted.clear()
    links.open_link(config, LONG[:1], 40, model, tok)
    assert len(counted) == 40
    monkeypatch.undo()
    for lesson, n in ((at_40, 40), (at_70, 70), (again_65, 65)):
        assert len(lesson.steps) == n and _state(lesson) == _state(EngineLesson.start(config, LONG, n, model, tok))


def test_a_short_link_is_replayed_directly_and_equals_start(tiny):
    """Below CACHE_FROM_STEPS a link is simply replayed (under the lock): the same state as start()."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=40)
    got = links.open_link(config, SPECS, 7, model, tok)
    assert _state(got) == _state(EngineLesson.start(config, SPECS, 7, model, tok)) and len(got.steps) == 7


def test_a_replay_gives_way_before_each_step_and_never_sleeps_for_nothing(tiny, monkeypatch):
    """A 40-step link asks to give way (ui.capacity.yielding_run) once before each of its 40 steps, for at most
    GIVE_WAY_S each, and never sleeps on its own (a quiet server replays at full speed); the state is start()'s."""
    from contextlib import contextmanager

    import ui.capacity

    model, tok = tiny
    asked, slept = [], []

    @contextmanager
    def yielding_run():
        yield lambda max_s: asked.append(max_s) or 0.0

    monkeypatch.setattr(ui.capacity, "yielding_run", yielding_run)
    monkeypatch.setattr("time.sleep", slept.append)
    links._kept().clear()
    config = DemoConfig(block_size=4, num_blocks=40)
    got = links.open_link(config, SPECS, 40, model, tok)
    assert asked == [links.GIVE_WAY_S] * 40 and slept == []
    monkeypatch.undo()
    assert _state(got) == _state(EngineLesson.start(config, SPECS, 40, model, tok))


def test_the_kept_replays_stay_within_their_byte_budget_newest_kept(tiny, monkeypatch):
    """With room for about one replay, keeping a second drops the first (least recently used), never the newest;
    what each kept replay holds is counted: its tensors and its samplers' states, as an independent walk of the kept
    lesson finds them (its live state and its checkpoints)."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=40)
    links._kept().clear()
    links.open_link(config, SPECS, 40, model, tok)
    one = links._kept().nbytes
    (kept, _), = links._kept().lessons.values()
    skip = (id(model), id(tok))
    assert one == tensor_bytes(kept, skip=skip) + generator_state_bytes(kept, skip=skip) > 0
    monkeypatch.setattr(links, "KEEP_BYTES", one + one // 2)
    links.open_link(config, SPECS[:1], 40, model, tok)
    store = links._kept()
    assert list(key[1] for key in store.lessons) == [tuple(SPECS[:1])] and store.nbytes <= one + one // 2
