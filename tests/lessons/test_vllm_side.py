"""lessons.vllm_side: an engine lesson's steps, fed to vLLM's own KVCacheManager, agree block for block."""

from __future__ import annotations

import pytest

from lessons.engine import EngineLesson
from lessons.engine_requests import ENGINE_SCENARIOS, SHARING_SCENARIOS, DemoConfig, RequestSpec
from lessons.vllm_side import VllmSide

from vllm_util import need_vllm

CASES = {**{f"engine.{k}": v for k, v in ENGINE_SCENARIOS.items() if v.requests},
         **{f"sharing.{k}": v for k, v in SHARING_SCENARIOS.items() if k != "samples"}}


def lesson_of(scenario, tiny, config=None):
    model, tok = tiny
    lesson = EngineLesson.start(config or scenario.config, list(scenario.requests), 0, model, tok)
    lesson.run()
    return lesson


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_scenario_is_identical_to_vllm(name, tiny):
    """Every page 4 / page 6 scenario without parallel samples (tiny pools that preempt, chunked prefill, prefix
    caching), run to the end: vLLM's tables, free blocks and hits equal ours after every step."""
    need_vllm()
    lesson = lesson_of(CASES[name], tiny)
    side = VllmSide.follow(None, lesson)
    assert side.verdict is None, side.verdict
    assert len(side.steps) == len(lesson.steps) > 0
    assert all(s.same for s in side.steps)


def test_preempting_pool_with_prefix_caching_is_identical(tiny):
    """A pool small enough to preempt, with prefix caching and shared prompts, whole-prompt and chunked: identical,
    and the run really preempted and hit the cache."""
    need_vllm()
    specs = [RequestSpec("The KV cache lives in blocks. " + s, max_tokens=20) for s in ("one", "two", "three")]
    for chunked in (False, True):
        config = DemoConfig(block_size=4, num_blocks=24, enable_prefix_caching=True, enable_chunked_prefill=chunked,
                            max_num_batched_tokens=64)
        model, tok = tiny
        lesson = EngineLesson.start(config, specs, 0, model, tok)
        lesson.run()
        side = VllmSide.follow(None, lesson)
        assert side.verdict is None, side.verdict
        assert any(t.paged.preempted for t in lesson.steps), "the pool must preempt"
        assert any((s.hits_ours or 0) > 0 for step in side.steps for s in step.seqs), "some prompt must hit"


def test_a_changed_table_is_reported_at_its_step(tiny):
    """The comparison can fail: a trace whose block table was altered after step 2 gives "differs at step 2",
    naming the sequence and both tables; follow() replays only new steps, and starts over after a Back."""
    need_vllm()
    lesson = lesson_of(ENGINE_SCENARIOS["three"], tiny)
    first = VllmSide.follow(None, lesson)
    assert first.verdict is None
    again = VllmSide.follow(first, lesson)
    assert again is first and len(again.steps) == len(lesson.steps)
    trace = lesson.steps[1].paged
    sid, table = next(iter(trace.block_tables_after.items()))
    trace.block_tables_after[sid] = [table[0] + 1] + table[1:] if table[0] + 1 < lesson.config.num_blocks else [0]
    side = VllmSide.follow(None, lesson)
    assert (side.verdict.step, side.verdict.code, side.verdict.values["seq"]) == (2, "table", sid)
    lesson.back()
    assert VllmSide.follow(side, lesson) is not side


def test_parallel_samples_stop_the_comparison(tiny):
    """n > 1 forks (ours, not vLLM v1's): the verdict says so at the fork's step instead of a false difference."""
    need_vllm()
    lesson = lesson_of(SHARING_SCENARIOS["samples"], tiny)
    side = VllmSide.follow(None, lesson)
    assert side.verdict is not None and side.verdict.code == "fork"
    assert lesson.steps[side.verdict.step - 1].paged.forked
