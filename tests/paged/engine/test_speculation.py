"""Speculative decoding in the engine (paged/engine/speculation.py): greedy output equals plain greedy decoding
exactly, whatever is accepted or rejected; cached_token_count and the block table are rolled back to what plain
decoding holds; the K/V history equals an independent contiguous twin's; no block is leaked."""

from __future__ import annotations

from functools import lru_cache

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from lessons.engine_requests import PROMPT_PRESETS, RequestSpec
from paged.addressing import blocks_needed
from paged.attention import gather_kv
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.model import load_model

pytestmark = pytest.mark.engine

MAX_TOKENS = 24


@lru_cache(maxsize=1)
def shipped():
    return load_model()


@lru_cache(maxsize=1)
def prompts() -> tuple[tuple[int, ...], ...]:
    """Two shipped recall prompts (the model copies them: lookup is right) and a count (lookup is mostly wrong)."""
    tok = shipped()[1]
    specs = [RequestSpec(PROMPT_PRESETS[k][1], PROMPT_PRESETS[k][0]) for k in ("recall_fox", "recall_code", "count")]
    return tuple(tuple(s.token_ids(tok)) for s in specs)


def engine(block_size=8, num_blocks=64, speculative=None, prefix=False, chunked=False, budget=2048, layout="paged"):
    model, tok = shipped()
    return LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=0.0,
                                             enable_prefix_caching=prefix),
                     SchedulerConfig(budget, 8, chunked, speculative), kv_layout=layout)


@lru_cache(maxsize=None)
def plain(max_tokens=MAX_TOKENS) -> tuple[tuple[int, ...], ...]:
    """Plain greedy decoding's tokens of each prompt (one roomy engine, no speculation): the reference."""
    outs = engine(num_blocks=128).generate([list(p) for p in prompts()], SamplingParams(max_tokens=max_tokens))
    return tuple(tuple(o.token_ids) for o in outs)


def check_rolled_back(e: LLMEngine) -> None:
    """After a step: every running sequence has exactly its newest token uncached and blocks for its cached ones."""
    for seq in e.scheduler.running:
        assert seq.cached_token_count == seq.num_tokens - 1
        assert len(seq.block_table) == blocks_needed(seq.cached_token_count, e.block_manager.block_size)


def run(e: LLMEngine, params=None) -> list[tuple[int, ...]]:
    ids = [e.add_request(list(p), params or SamplingParams(max_tokens=MAX_TOKENS)) for p in prompts()]
    while e.has_unfinished():
        e.step()
        check_rolled_back(e)
    assert e.block_manager.num_free_blocks == e.num_blocks and not any(e.block_manager.ref_counts)  # no leak
    return [tuple(e.output(i).token_ids) for i in ids]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("block_size, num_blocks, prefix", [(2, 40, False), (3, 24, True), (8, 64, True)])
def test_greedy_equals_plain(k, block_size, num_blocks, prefix):
    """Speculating k tokens a step gives plain greedy decoding's tokens exactly, with and without prefix caching;
    the small pools preempt (recompute) and rejected tails cross block boundaries; no block is leaked."""
    e = engine(block_size, num_blocks, ("ngram", k), prefix)
    assert run(e) == list(plain())
    stats = e.speculative.stats
    assert sum(s["num_accepted"] for s in stats.values()) > 0  # the copies were guessed right
    assert any(s["num_accepted"] < s["num_proposed"] for s in stats.values())  # the count's guesses were not
    if num_blocks < 30:
        assert sum(e.output(i).num_preemptions for i in range(3)) > 0


def test_fewer_forward_passes():
    """The recall prompts' copies are guessed: 8 guesses a step need far fewer steps than one token a step."""
    e = engine(speculative=("ngram", 8))
    out = e.generate([list(prompts()[0])], SamplingParams(max_tokens=MAX_TOKENS))
    assert tuple(out[0].token_ids) == plain()[0] and e.step_count <= MAX_TOKENS // 3


def test_rejected_tail_frees_the_block_it_opened():
    """A proposer that is always wrong from its second guess on: with block_size 2 the rejected guesses open new
    blocks, which the rollback frees again (to the head of the free queue); the output is still plain greedy's."""
    e = engine(block_size=2, num_blocks=60, speculative=("ngram", 4))
    ref = plain()[0]
    e.speculative.proposer = lambda seq, k: [ref[len(seq.generated_token_ids)]] + [0] * (k - 1)
    rid = e.add_request(list(prompts()[0]), SamplingParams(max_tokens=MAX_TOKENS))
    opened = 0
    while e.has_unfinished():
        trace = e.step()
        check_rolled_back(e)
        for sid, s in trace.speculative.items():
            assert s["accepted"] <= 1 and s["discarded_slots"] == s["slots"][len(s["emitted"]):]
            if sid in trace.block_tables_after:
                table = trace.block_tables_after[sid]
                assert set(s["blocks_freed"]) <= set(s["blocks_taken"]) and not set(s["blocks_freed"]) & set(table)
            opened += bool(s["blocks_freed"])
    assert tuple(e.output(rid).token_ids) == ref and opened >= 3


def test_chunked_prefill_and_budget():
    """With chunked prefill and a 12-token budget, no step feeds more than 12 tokens (each guess counts) and the
    output is plain greedy's."""
    e = engine(speculative=("ngram", 8), chunked=True, budget=12)
    ids = [e.add_request(list(p), SamplingParams(max_tokens=MAX_TOKENS)) for p in prompts()]
    while e.has_unfinished():
        assert len(e.step().slot_mapping) <= 12
    assert [tuple(e.output(i).token_ids) for i in ids] == list(plain())


def test_sampling_requests_are_not_speculated():
    """A request with temperature > 0 gets no guesses and samples the same tokens (same seed) as without
    speculation, beside greedy ones that do."""
    params = [SamplingParams(max_tokens=16), SamplingParams(max_tokens=16, temperature=0.8, seed=3)]
    outs = []
    for spec in (None, ("ngram", 4)):
        e = engine(speculative=spec)
        ids = [e.add_request(list(prompts()[i]), p) for i, p in zip((0, 2), params)]
        while e.has_unfinished():
            e.step()
        outs.append([e.output(i).token_ids for i in ids])
        if spec:
            assert e.speculative.stats.get(ids[1], {}).get("num_proposed", 0) == 0
    assert outs[0] == outs[1]


class Oracle:
    """A proposer whose guesses are right for pattern[step] tokens (then wrong): any accept / reject pattern."""

    def __init__(self, pattern: list[int]) -> None:
        self.pattern, self.calls = pattern, 0

    def __call__(self, seq, k: int) -> list[int]:
        ref, done = plain()[seq.seq_id], len(seq.generated_token_ids)
        right = min(self.pattern[self.calls % len(self.pattern)], k)
        self.calls += 1
        guesses = list(ref[done:done + right])
        return guesses + [(t + 1) % 256 for t in ref[done + len(guesses):done + k]]  # wrong from here on


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.lists(st.integers(0, 8), min_size=4, max_size=12), k=st.sampled_from([1, 2, 4, 8]),
       block_size=st.sampled_from([1, 2, 3, 5]))
def test_random_accept_patterns_match_the_contiguous_twin(pattern, k, block_size):
    """For random accept / reject patterns, after every step the paged engine's K/V history (gathered through its
    block table) equals the contiguous twin's, cached_token_count and tables are rolled back, the accepted counts
    follow the pattern, and the output is plain greedy's."""
    engines = [engine(block_size, 256, ("ngram", k), layout=layout) for layout in ("paged", "contiguous")]
    for e in engines:
        e.speculative.proposer = Oracle(pattern)
        for p in prompts():
            e.add_request(list(p), SamplingParams(max_tokens=MAX_TOKENS))
    paged, contiguous = engines
    while paged.has_unfinished():
        traces = [e.step() for e in engines]
        assert {s: v["accepted"] for s, v in traces[0].speculative.items()} == \
            {s: v["accepted"] for s, v in traces[1].speculative.items()}
        check_rolled_back(paged)
        for seq in paged.scheduler.running:
            n = seq.cached_token_count
            for layer in range(paged.model.config.num_hidden_layers):
                keys, values = gather_kv(*paged.runner.pool.layer(layer), seq.block_table, n)
                ref_k, ref_v = contiguous.runner.contiguous[seq.seq_id].get(layer)
                for ours, ref in ((keys, ref_k[:n]), (values, ref_v[:n])):
                    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-5 * max(1.0, ref.abs().max().item()))
    for i in range(3):
        assert tuple(paged.output(i).token_ids) == tuple(contiguous.output(i).token_ids) == plain()[i]
    assert paged.block_manager.num_free_blocks == paged.num_blocks


def test_forgetting_the_rollback_drifts():
    """The break-it: with rollback off, rejected guesses' K/V stay counted as history and the output drifts from
    plain greedy decoding (the contiguous twin, rolled back, does not)."""
    e = engine(speculative=("ngram", 4))
    e.speculative.rollback = False
    out = e.generate([list(p) for p in prompts()], SamplingParams(max_tokens=MAX_TOKENS))
    assert [tuple(o.token_ids) for o in out] != list(plain())


def test_prefix_cache_hashes_what_plain_decoding_hashes():
    """With prefix caching, the full blocks a speculating engine has indexed once every request finished hold the
    same token runs as plain decoding's (accepted tokens' blocks are hashed, never a block holding a guess)."""
    indexed = []
    for spec in (None, ("ngram", 4)):
        e = engine(block_size=4, num_blocks=128, speculative=spec, prefix=True)
        assert run(e) == list(plain())
        indexed.append(sorted(e.block_manager.cache.block_tokens.values()))
    assert indexed[0] == indexed[1] and len(indexed[0]) > 20


def test_parallel_samples_and_no_recording():
    """n = 2 greedy samples (children share the prompt's blocks, copy-on-write on their first decode) and an engine
    that records nothing both give what plain decoding gives."""
    outs = []
    for spec in (None, ("ngram", 4)):
        e = engine(block_size=4, num_blocks=80, speculative=spec)
        e.record = False
        got = e.generate([list(p) for p in prompts()[:2]], SamplingParams(max_tokens=16, n=2))
        outs.append([o.samples for o in got])
        assert e.block_manager.num_free_blocks == e.num_blocks
    assert outs[0] == outs[1] and outs[0][0][0] == outs[0][0][1]


def test_a_fault_is_refused_with_speculation():
    """Bug-lab faults rebuild a plain step's inputs: combined with speculation they are refused by name."""
    model, tok = shipped()
    with pytest.raises(ValueError, match="without speculative decoding"):
        LLMEngine(model, tok, scheduler_config=SchedulerConfig(speculative=("ngram", 2)), fault="late_increment")


def test_a_failing_step_is_rolled_back():
    """A verification pass that raises after the guesses took their blocks: the step is rolled back (blocks,
    cached_token_count as before it), and the engine, stepped on once mended, still gives plain greedy's tokens."""
    from paged.engine.checkpoint import EngineStepError

    e = engine(block_size=2, num_blocks=60, speculative=("ngram", 4))
    rid = e.add_request(list(prompts()[0]), SamplingParams(max_tokens=MAX_TOKENS))
    for _ in range(3):
        e.step()
    seq = e.requests[rid]
    before = (seq.cached_token_count, list(seq.block_table), e.block_manager.num_free_blocks)
    assert len(e.speculative.proposer(seq, 4)) == 4  # this step's guesses need blocks of their own (block_size 2)
    e.speculative._forward = lambda seqs, batch: 1 / 0  # after ensure_capacity took the guesses' blocks
    with pytest.raises(EngineStepError, match="ZeroDivisionError"):
        e.step()
    assert (seq.cached_token_count, list(seq.block_table), e.block_manager.num_free_blocks) == before
    del e.speculative._forward
    while e.has_unfinished():
        e.step()
    assert tuple(e.output(rid).token_ids) == plain()[0]
