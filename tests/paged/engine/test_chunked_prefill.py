"""Chunked prefill (SchedulerConfig(enable_chunked_prefill=True)): same greedy tokens as whole-prompt prefill and as
a no-cache reference, paged == contiguous twins, long prompts admitted and spread over steps, mixed steps."""

import math
import random

import pytest

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import EngineStepError, LLMEngine
from paged.engine.twins import run_twins
from paged.model.data import greedy_continue

from helpers import tiny_model

pytestmark = pytest.mark.engine

BUDGET = 16
MAX_TOKENS = 6


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


def prompts(seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    short = [[rng.randrange(256) for _ in range(n)] for n in (5, 9)]
    long = [[rng.randrange(256) for _ in range(n)] for n in (40, 53, 60)]
    shared = long[0][:32] + [rng.randrange(256) for _ in range(12)]  # shares two full blocks of 16 with long[0]
    return short + long + [shared]


def engine(tiny, chunked: bool, num_blocks: int = 64, prefix: bool = False, budget: int = BUDGET,
           layout: str = "paged") -> LLMEngine:
    model, tok = tiny
    return LLMEngine(model, tok, CacheConfig(block_size=4 if not prefix else 16, num_blocks=num_blocks, seed=3,
                                             watermark=0.0, enable_prefix_caching=prefix),
                     SchedulerConfig(max_num_batched_tokens=budget if chunked else 128,
                                     enable_chunked_prefill=chunked),
                     kv_layout=layout, attn_impl="gather")


def run(eng: LLMEngine, ps: list[list[int]], stagger: int = 2) -> tuple[list[list[int]], list]:
    """Add the two short prompts first, the long ones `stagger` steps later (so they chunk beside decodes)."""
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    ids = [eng.add_request(p, params) for p in ps[:2]]
    traces = [eng.step() for _ in range(stagger)]
    ids += [eng.add_request(p, params) for p in ps[2:]]
    while eng.has_unfinished():
        traces.append(eng.step())
    eng.block_manager.check_invariants()
    return [eng.output(i).token_ids for i in ids], traces


def test_chunked_matches_unchunked_and_reference(tiny):
    ps = prompts()
    chunked, traces = run(engine(tiny, True), ps)
    whole, _ = run(engine(tiny, False), ps)
    reference = greedy_continue(tiny[0], ps, [MAX_TOKENS] * len(ps))
    assert chunked == whole == reference
    mixed = [t for t in traces if t.phase == "mixed"]
    assert mixed, "no step held both a decode and a prompt chunk"
    for t in mixed:  # told with codes the UI translates: a prompt fed whole or in chunks, beside decodes
        codes = {code for code, _ in t.why}
        assert codes & {"prefill", "prefill_chunk"} and "decode" in codes and "decode" in t.reason
    chunk_pieces = [v for t in traces for code, v in t.why if code == "prefill_chunk"]
    assert chunk_pieces, "no step told a prompt chunk"
    for t in traces:  # each chunk piece names the token indexes this step fed to that sequence
        fed = {s.seq_id: s.positions for s in t.seqs if s.tokens_in}
        for code, v in t.why:
            if code == "prefill_chunk":
                assert (v["start"], v["end"]) == (fed[v["seq"]][0], fed[v["seq"]][-1]) and v["end"] < v["total"]
    for t in traces:  # never more tokens than the budget in one step
        assert sum(len(s.tokens_in) for s in t.seqs) <= BUDGET
    assert any(s.token_out is None for t in traces for s in t.seqs), "no chunk mid-prefill"


def test_long_prompt_prefills_over_ceil_len_over_budget_steps(tiny):
    prompt = list(range(60))
    eng = LLMEngine(tiny[0], tiny[1], CacheConfig(block_size=4, num_blocks=64),
                    SchedulerConfig(max_num_batched_tokens=BUDGET), attn_impl="gather")
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        eng.add_request(prompt)
    eng = engine(tiny, True)
    rid = eng.add_request(prompt, SamplingParams(max_tokens=2, ignore_eos=True))
    steps = 0
    while not eng.requests[rid].generated_token_ids:
        trace = eng.step()
        steps += 1
        (state,) = trace.seqs
        assert state.positions == list(range((steps - 1) * BUDGET, min(steps * BUDGET, len(prompt))))
    assert steps == math.ceil(len(prompt) / BUDGET)
    assert eng.requests[rid].generated_token_ids == greedy_continue(tiny[0], [prompt], [1])[0]


@pytest.mark.parametrize("num_blocks", [64, 28])  # 28: preempts even though a prompt is admitted only whole
def test_twins_agree_chunked_with_preemption(tiny, num_blocks):
    model, tok = tiny
    ps = prompts()
    twins = run_twins(model, tok, ps, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True),
                      CacheConfig(block_size=4, num_blocks=num_blocks, seed=3, watermark=0.0),
                      SchedulerConfig(max_num_batched_tokens=BUDGET, enable_chunked_prefill=True), attn_impl="gather")
    assert twins.verdict.agrees() and twins.verdict.same_schedule
    reference = greedy_continue(model, ps, [MAX_TOKENS] * len(ps))
    assert [o.token_ids for o in twins.paged] == reference
    assert (sum(o.num_preemptions for o in twins.paged) > 0) == (num_blocks == 28)
    if num_blocks == 28:
        eng = engine(tiny, True, num_blocks=28)
        out, traces = run(eng, ps, stagger=0)
        assert out == reference
        assert any(t.preempted for t in traces), "the small pool should force a preemption"


def test_chunked_with_prefix_caching(tiny):
    ps = prompts()
    eng = engine(tiny, True, prefix=True)
    out, _ = run(eng, ps[2:3], stagger=0)  # long[0] alone first: its full blocks get cached
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    rid = eng.add_request(ps[-1], params)
    first = eng.step()
    assert first.seqs[0].positions[0] == 32, "two cached blocks of 16 should be skipped"
    while eng.has_unfinished():
        eng.step()
    eng.block_manager.check_invariants()
    reference = greedy_continue(tiny[0], [ps[2], ps[-1]], [MAX_TOKENS] * 2)
    assert [out[0], eng.output(rid).token_ids] == reference


def test_parallel_samples_fork_after_the_last_chunk(tiny):
    model, tok = tiny
    ps = prompts()[2:4]
    twins = run_twins(model, tok, ps, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, n=2),
                      CacheConfig(block_size=4, num_blocks=64, seed=3, watermark=0.0),
                      SchedulerConfig(max_num_batched_tokens=BUDGET, enable_chunked_prefill=True), attn_impl="gather")
    assert twins.verdict.agrees() and twins.verdict.same_schedule
    reference = greedy_continue(model, ps, [MAX_TOKENS] * len(ps))
    assert [o.samples for o in twins.paged] == [[r, r] for r in reference]


@pytest.mark.parametrize("prefix", [False, True])
def test_failed_chunk_step_is_rolled_back(tiny, monkeypatch, prefix):
    """The model raises (after its K/V writes) in every third step, chunks and mixed steps among them: each
    failed step is undone and retried, and the tokens are still the reference's."""
    ps = prompts()
    eng = engine(tiny, True, prefix=prefix)
    real, calls = eng.runner.model, []

    def flaky(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) % 3 == 0:
            raise RuntimeError("simulated device error")
        return out

    monkeypatch.setattr(eng.runner, "model", flaky)
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    ids = [eng.add_request(p, params) for p in ps]
    errors = 0
    while eng.has_unfinished():
        try:
            eng.step()
        except EngineStepError:
            errors += 1
        eng.block_manager.check_invariants()
    assert errors > 0
    assert [eng.output(i).token_ids for i in ids] == greedy_continue(tiny[0], ps, [MAX_TOKENS] * len(ps))


def test_block_manager_chunk_allocation():
    """allocate(max_new_tokens) covers only the first chunk; ensure_capacity grows the table or refuses cleanly."""
    from paged.block_manager import BlockManager
    from paged.sequence import Sequence

    bm = BlockManager(num_blocks=5, block_size=4, watermark=0.0)
    seq = Sequence(0, list(range(18)))  # 5 blocks in all
    with pytest.raises(ValueError, match="holds no blocks"):
        bm.ensure_capacity(seq, 4)
    assert bm.can_allocate(seq, max_new_tokens=6) and len(bm.allocate(seq, max_new_tokens=6)) == 2
    other = Sequence(1, list(range(8)))
    bm.allocate(other)  # 2 blocks: 1 left
    assert bm.blocks_to_grow(seq, 18) == 3
    with pytest.raises(ValueError, match="needs 3 more blocks"):
        bm.ensure_capacity(seq, 18)
    assert len(seq.block_table) == 2 and bm.num_free_blocks == 1  # nothing changed
    assert len(bm.ensure_capacity(seq, 12)) == 1 and len(seq.block_table) == 3
    bm.check_invariants()
