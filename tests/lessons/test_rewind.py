"""Back from checkpoints (lessons.rewind, lessons.engine_rewind): after any sequence of steps, Backs and adds, the
lesson is exactly what a fresh replay of its log gives (the same export, rows, histories, and the same future:
both run to the end alike), while the checkpoints stay within their byte budget."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings, strategies as hs

from lessons.batch import BatchConfig, BatchLesson
from lessons.engine import EngineLesson
from lessons.engine_requests import DemoConfig, RequestSpec
from helpers import generator_state_bytes, tensor_bytes
from lessons.rewind import Checkpoints, copied_bytes


# --- the store ------------------------------------------------------------------------------------------------------
def test_checkpoints_keep_every_kth_and_a_fresh_copy_each_time():
    """Only multiples of the spacing are kept; best() gives the newest fitting one at or before the target, as a new
    copy each time (changing it leaves the kept one as it was)."""
    store = Checkpoints(every=3)
    for position in range(1, 10):
        store.save(position, {"at": position, "t": torch.zeros(2)}, log=range(position))
    assert store.positions == [3, 6, 9]
    at, got = store.best(8, lambda copy, log, p: True)
    assert at == 6 and got["at"] == 6
    got["t"] += 1
    assert store.best(8, lambda copy, log, p: True)[1]["t"].sum() == 0
    assert store.best(8, lambda copy, log, p: p < 6)[0] == 3 and store.best(2, lambda *a: True) is None


def test_checkpoints_thin_out_past_their_budget_oldest_first():
    """Copies of 4 KiB tensors (every 2nd position) under a budget of 16: never more than 16 kept; the newest
    RECENT stay 2 apart, the older ones are sparser (at multiples of 8 or more); each copy's bytes are counted once
    however many views share its storage."""
    from lessons.rewind import RECENT

    big = torch.zeros(1024)  # 4 KiB
    assert tensor_bytes({"a": big, "b": big[:10], "c": [big.view(32, 32)]}) == 4096
    store = Checkpoints(every=2, budget_bytes=16 * 4096)
    for position in range(1, 400):
        store.save(position, {"t": big.clone()}, log=())
        assert store.nbytes <= 16 * 4096
    kept = store.positions
    assert len(kept) == 16 and kept[-RECENT:] == list(range(398 - 2 * (RECENT - 1), 399, 2))
    assert all(p % 8 == 0 for p in kept[:-RECENT]) and kept[0] < 200


# --- batch decode ---------------------------------------------------------------------------------------------------
def _batch_state(demo: BatchLesson) -> tuple:
    pg = demo.playground
    return (json.dumps(demo.trace(), default=str), pg.pool.key_cache.clone(), pg.pool.value_cache.clone(),
            pg.generator.get_state(), pg.query_generator.get_state())


def _same_batch(a: BatchLesson, b: BatchLesson) -> bool:
    sa, sb = _batch_state(a), _batch_state(b)
    return sa[0] == sb[0] and all(torch.equal(x, y) for x, y in zip(sa[1:], sb[1:]))


@settings(max_examples=30, deadline=None)
@given(hs.lists(hs.sampled_from(["d", "d", "d", "back", "back", "f0", "f1", "a3", "w2"]), max_size=40))
def test_batch_back_from_checkpoints_equals_a_fresh_replay(moves):
    """Random decode / finish / add / misplaced-write steps and Backs, checkpoints every 2 ops: after each move the
    lesson equals BatchLesson.replay of its ops (trace, pool bytes, both generators' states)."""
    config = BatchConfig(num_blocks=16)
    demo = BatchLesson(config)
    demo._rewind = Checkpoints(every=2)
    for move in moves:
        if move == "back":
            if demo.ops:
                demo = demo.without_last()
        elif not demo.apply(move).ok:
            continue  # refused: nothing changed but the event shown (a replay of the log has no refused op)
        fresh, _ = BatchLesson.replay(config, demo.ops)
        assert _same_batch(demo, fresh), f"after {move!r} at ops {demo.ops}"
    assert len(demo._rewind) > 0 or len(demo.ops) < 2 or "back" not in moves


# --- the engine -----------------------------------------------------------------------------------------------------
PROMPTS = ["hello paged world", "1 2 3 4", "abc abc abc"]


def _untimed(obj):
    """`obj` without its "elapsed_ms" entries (a step's wall time: the one thing a replay does not repeat)."""
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items() if k != "elapsed_ms"}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


def _engine_state(lesson: EngineLesson) -> str:
    return json.dumps({"trace": _untimed(lesson.trace()), "rows": [vars(r) for r in lesson.rows()],
                       "history": [vars(h) for h in lesson.history], "alloc": [vars(a) for a in lesson.allocations],
                       "pending": [vars(p) for p in lesson.pending], "ids": lesson.display_ids(),
                       "queues": lesson.queues()}, default=str, sort_keys=True)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(hs.lists(hs.one_of(hs.just("step"), hs.just("step"), hs.just("back"),
                          hs.tuples(hs.sampled_from(range(len(PROMPTS))), hs.integers(0, 3), hs.integers(0, 1))),
                min_size=1, max_size=30))
def test_engine_back_from_checkpoints_equals_a_fresh_replay(tiny, moves):
    """Random steps, Backs and adds (now or a few steps ahead, greedy or seeded sampling) on a small pool,
    checkpoints every 2 steps: after each move the lesson equals EngineLesson.replay of its requests and steps, and
    both then run to the end alike."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=24)
    lesson = EngineLesson(config, model, tok)
    lesson._rewind.every = 2
    for move in moves:
        if move == "step":
            lesson.forward()
        elif move == "back":
            lesson.back()
        else:
            which, ahead, sampled = move
            lesson.offer(RequestSpec(PROMPTS[which], max_tokens=6 + which, temperature=float(sampled), seed=which,
                                     at_step=len(lesson.steps) + ahead))
        lesson.take_news()
        fresh = EngineLesson.replay(config, lesson.all_specs(), len(lesson.steps), model, tok)
        assert _engine_state(lesson) == _engine_state(fresh), f"after {move!r} at step {len(lesson.steps)}"
    lesson.run_to_end()
    fresh.run_to_end()
    assert _engine_state(lesson) == _engine_state(fresh)


def _stepped(tiny, max_tokens: int, steps: int) -> EngineLesson:
    """An engine lesson with checkpoints every 4 steps, one request, `steps` steps run."""
    model, tok = tiny
    lesson = EngineLesson(DemoConfig(block_size=4, num_blocks=40), model, tok)
    lesson._rewind.every = 4
    lesson.add(RequestSpec("hello paged world", max_tokens=max_tokens))
    for _ in range(steps):
        lesson.step()
    return lesson


def test_a_checkpoint_counts_the_bytes_of_the_tensors_it_copied(tiny):
    """An engine lesson's checkpoints count what the copy made (read off the deepcopy's memo): the same total as an
    independent walk of the copy that skips what it shares with the lesson (helpers.tensor_bytes, plus the
    state of each torch.Generator it holds); a copied view adds nothing over its storage, a shared tensor nothing."""
    import copy

    lesson = _stepped(tiny, max_tokens=12, steps=8)
    store = lesson._rewind
    assert store.positions == [4, 8]
    for position in store.positions:
        snapshot, _, counted = store._copies[position]
        shared = store._memo(snapshot)
        assert counted == tensor_bytes(snapshot, skip=shared) + generator_state_bytes(snapshot, skip=shared) > 0
    big, kept = torch.zeros(256), torch.ones(64)
    shared = {id(kept): kept}
    memo = dict(shared)
    copy.deepcopy({"a": big, "view": big[:8], "kept": kept}, memo)
    assert copied_bytes(memo, shared) == 1024


def test_engine_back_uses_a_checkpoint_not_a_replay_from_step_0(tiny, monkeypatch):
    """At step 9 with checkpoints every 4 steps, Back builds step 8 from the checkpoint at 8: no replay from step 0
    and no step run; a second Back (to 7) replays 3 steps from the checkpoint at 4."""
    lesson = _stepped(tiny, max_tokens=30, steps=9)
    replays, steps = [], []
    monkeypatch.setattr(EngineLesson, "replay", classmethod(lambda cls, *a, **k: replays.append(a) or None))
    real_step = EngineLesson.step
    monkeypatch.setattr(EngineLesson, "step", lambda self: steps.append(1) or real_step(self))
    assert lesson.back() and len(lesson.steps) == 8 and steps == [] and replays == []
    assert lesson.back() and len(lesson.steps) == 7 and len(steps) == 3 and replays == []


def test_a_checkpoint_taken_before_a_request_it_should_hold_is_never_used(tiny):
    """Checkpoints at 4 and 8; Back to step 3; a request arriving at step 3 is added. The checkpoint at 4 lacks it
    (a replay admits it after step 3), so building step 6 must not start there: the result equals a fresh replay."""
    from lessons.engine_rewind import rewound

    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=40)
    lesson = EngineLesson(config, model, tok)
    lesson._rewind.every = 4
    lesson.add(RequestSpec("hello paged world", max_tokens=30))
    for _ in range(8):
        lesson.step()
    store = lesson._rewind
    for _ in range(5):
        lesson.back()
    lesson._rewind = store  # (a Back from step 0 would start a new store: keep the one holding 4 and 8)
    assert len(lesson.steps) == 3 and 4 in store.positions
    lesson.add(RequestSpec("abc abc", max_tokens=5, at_step=3))
    built = rewound(lesson, 6)
    fresh = EngineLesson.replay(config, lesson.all_specs(), 6, model, tok)
    assert built is None or _engine_state(built) == _engine_state(fresh)
