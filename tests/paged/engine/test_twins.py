"""Twin engines compare like with like: logits of the same generated token of the same request, whatever step each
twin produced it at. Prefix caching under memory pressure makes the schedules differ; that must not read as a fault,
and a real fault must still be caught."""

from dataclasses import replace

import pytest

from paged.config import SamplingParams
from paged.engine.twins import TwinEngines
from lessons.engine_requests import ENGINE_SCENARIOS, SHARED_PREFIX, SHARING_SCENARIOS, RequestSpec

pytestmark = pytest.mark.engine


def run(shipped, specs, config, fault=None):
    """Add each RequestSpec when `at_step` steps have run (as the Sharing page does), step both twins to the end."""
    model, tok = shipped
    twins = TwinEngines(model, tok, config.cache_config(), config.scheduler_config(), "gather", fault)
    pending, steps = sorted(specs, key=lambda s: s.at_step), []
    while pending or twins.has_unfinished():
        while pending and pending[0].at_step <= len(steps):
            spec = pending.pop(0)
            twins.add_request(spec.token_ids(tok), spec.params())
        steps.append(twins.step())
    return twins, steps


@pytest.mark.parametrize("scenario, num_blocks", [("prefix", 18), ("prefix", 26), ("prefix", 34), ("same", 30),
                                                  ("same", 40), ("same", 50), ("samples", 64)])
def test_differing_schedules_are_not_a_false_alarm(shipped, scenario, num_blocks):
    """At these sizes the paged engine (prefix caching) and its contiguous twin schedule differently; compared token
    by token their logits agree within 1e-5 of the logits' magnitude and every output is identical."""
    sc = SHARING_SCENARIOS[scenario]
    twins, steps = run(shipped, sc.requests, replace(sc.config, num_blocks=num_blocks))
    paged, contiguous = twins.outputs()
    assert [p.samples for p in paged] == [c.samples for c in contiguous]
    verdict = twins.verdict()
    expected_tokens = sum(len(s) for p in paged for s in p.samples)
    assert verdict.compared == expected_tokens, "every generated token is compared exactly once"
    worst = max(s.max_diff for s in steps)
    scale = max(max(s.logits_scale.values(), default=0.0) for s in steps)
    assert worst <= 1e-5 * max(1.0, scale), f"max |Δlogits| {worst} at logits of magnitude {scale}"
    assert verdict.agrees() and all(all(s.same_tokens.values()) for s in steps)
    if (scenario, num_blocks) in (("prefix", 18), ("same", 30)):
        assert not verdict.same_schedule, "these sizes were chosen because the schedules differ there"


@pytest.mark.parametrize("fault", ["slot_off_by_one", "early_increment"])
def test_a_real_fault_is_still_caught_when_schedules_differ(shipped, fault):
    """The same scenario with a fault injected into the paged twin: the verdict says they differ."""
    sc = SHARING_SCENARIOS["prefix"]
    twins, _ = run(shipped, sc.requests, replace(sc.config, num_blocks=18), fault)
    verdict = twins.verdict()
    assert not verdict.agrees() and verdict.max_diff > 1e-2 * max(1.0, verdict.max_abs_logit)


def test_request_ids_may_differ_between_twins(shipped):
    """A parallel sample takes an id when its parent's prefill runs; prefix caching admits the parent earlier in the
    paged engine, so a request arriving in between gets different ids in the two twins. Requests are still matched
    by arrival order: every output (prompt and samples) pairs up."""
    cfg = replace(SHARING_SCENARIOS["prefix"].config, num_blocks=15, watermark=0.0)
    specs = [RequestSpec(SHARED_PREFIX + "Q1", max_tokens=16),
             RequestSpec(SHARED_PREFIX + "Q22", temperature=1.0, seed=3, n=2, max_tokens=16, at_step=1),
             RequestSpec("1 2 3 4", "continue", max_tokens=8, at_step=4)]
    twins, _ = run(shipped, specs, cfg)
    paged, contiguous = twins.outputs()
    assert [p.request_id for p in paged] != [c.request_id for c in contiguous], "meant to exercise differing ids"
    assert [p.prompt_token_ids for p in paged] == [c.prompt_token_ids for c in contiguous]
    assert [p.samples for p in paged] == [c.samples for c in contiguous] and twins.verdict().agrees()
    assert twins.abort(twins.request_ids[0]) is False  # finished: nothing to stop in either twin


def test_refused_request_leaves_both_twins_alike(shipped):
    """A request both twins refuse raises ValueError and queues nothing in either."""
    model, tok = shipped
    twins = TwinEngines(model, tok, attn_impl="gather")
    with pytest.raises(ValueError):
        twins.add_request([1, 2, 10**6], SamplingParams())
    assert not twins.has_unfinished() and twins.request_ids == []


@pytest.mark.parametrize("scenario", ["prefix", "chunked"])
def test_prompt_chunks_are_not_compared_as_tokens(shipped, scenario):
    """With chunked prefill and prefix caching, the twins split a prompt into different chunks (the paged one
    skips its cached blocks); a chunk before the last samples nothing, so it must not be paired with the twin's
    chunk as if it were a token: the verdict agrees and every output is identical."""
    sc = {**SHARING_SCENARIOS, **ENGINE_SCENARIOS}[scenario]
    config = replace(sc.config, max_num_batched_tokens=16, enable_chunked_prefill=True, enable_prefix_caching=True)
    twins, steps = run(shipped, sc.requests, config)
    paged, contiguous = twins.outputs()
    assert [o.token_ids for o in paged] == [o.token_ids for o in contiguous]
    verdict = twins.verdict()
    assert verdict.compared == sum(len(o.token_ids) for o in paged)  # every sampled token, and nothing else
    assert verdict.agrees(), verdict
