"""Preemption by swap versus recompute in the engine: same greedy tokens as a run without pressure and as
transformers, no block leaked in either pool, a swapped sequence resumes decoding, a full swap pool recomputes."""

import pytest
import torch

from benchmarks.hf import hf_twin
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.swapping import preemption_counts

from helpers import scaled_atol

pytestmark = pytest.mark.engine

PROMPTS = ["Hello, paged world!", "1 2 3 4 5 6", "abcdefghij", "The block table maps logical blocks."]
MAX_TOKENS = 20


def run(model, tok, mode, num_blocks, swap_space=64, layout="paged", block_size=4):
    """Every prompt through one engine; returns (token ids per prompt, traces, engine)."""
    engine = LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=3),
                       SchedulerConfig(preemption_mode=mode, swap_space=swap_space), kv_layout=layout,
                       attn_impl="gather")
    ids = [engine.add_request(p, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)) for p in PROMPTS]
    traces = []
    while engine.has_unfinished():
        traces.append(engine.step())
    return [engine.output(i).token_ids for i in ids], traces, engine


@pytest.fixture(scope="module")
def no_pressure(shipped):
    return run(*shipped, "recompute", 1000)[0]


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_tiny_pool_gives_the_no_pressure_tokens_and_leaks_nothing(shipped, no_pressure, mode):
    """Under pressure both modes preempt, in their own way, and still produce the unpressured run's tokens; both
    pools are whole again at the end."""
    outs, traces, engine = run(*shipped, mode, 18)
    assert outs == no_pressure
    preempted = sum(len(t.preempted) for t in traces)
    swapped = sum(len(t.swap_out) for t in traces)
    assert preempted >= 2, "the pool was meant to be small enough to preempt"
    assert swapped == (preempted if mode == "swap" else 0)
    assert sum(len(t.swap_in) for t in traces) == swapped
    assert engine.block_manager.num_free_blocks == engine.num_blocks
    if mode == "swap":
        assert engine.swapper.space.num_free_blocks == 64 and not engine.swapper.space.tables
    totals = [preemption_counts(engine, rid) for rid in engine.requests]
    assert sum(s for s, _ in totals) == swapped and sum(r for _, r in totals) == preempted - swapped


def test_swapped_sequence_keeps_its_cache_and_resumes_decoding(shipped):
    """Swapped out: its table's blocks go to the swap pool, cached_token_count kept; swapped in: fresh blocks, the
    same count of them, and that very step feeds it one token (a decode), not its history; recompute feeds all."""
    _, traces, _ = run(*shipped, "swap", 18)
    out_step = next(t for t in traces if t.swap_out)
    sid, pairs = next(iter(out_step.swap_out.items()))
    assert [p[0] for p in pairs] == out_step.block_tables_before[sid]
    assert any(code == "swapped_out" for code, _ in out_step.why) and sid in out_step.swapped
    in_step = next(t for t in traces[out_step.step:] if sid in t.swap_in)
    back = in_step.swap_in[sid]
    assert [p[0] for p in back] == [p[1] for p in pairs]
    state = next(s for s in in_step.seqs if s.seq_id == sid)
    assert len(state.tokens_in) == 1 and state.context_len == state.cached_token_count
    assert in_step.block_tables_after[sid][:len(back)] == [p[1] for p in back]
    _, rtraces, _ = run(*shipped, "recompute", 18)
    r_step = next(t for t in rtraces if t.preempted)
    victim = r_step.preempted[0]
    again = next(t for t in rtraces[r_step.step + 1:] if victim in t.scheduled)
    refed = next(s for s in again.seqs if s.seq_id == victim)
    assert again.phase == "prefill" and len(refed.tokens_in) == refed.context_len > 1


def test_full_swap_pool_falls_back_to_recompute_and_says_so(shipped, no_pressure):
    """A swap pool smaller than a victim's table: that victim is recomputed, the step's reason names it; tokens
    are unchanged and the swap pool ends empty."""
    outs, traces, engine = run(*shipped, "swap", 18, swap_space=7)
    fell = [(t, code, values) for t in traces for code, values in t.why if code in ("swap_full", "swap_too_small")]
    assert fell, "some victim was meant to need more than 7 swap blocks"
    assert all((code == "swap_too_small") == (values["need"] > 7) for _, code, values in fell)  # issue 38
    trace, _, values = fell[0]
    assert values["seq"] in trace.preempted and values["seq"] not in trace.swap_out
    assert values["need"] > values["free"] and "recomputed" in trace.reason
    assert outs == no_pressure
    assert engine.swapper.space.num_free_blocks == 7 and engine.block_manager.num_free_blocks == engine.num_blocks


def test_swap_mode_paged_equals_contiguous_step_by_step(shipped):
    """The paged engine and its contiguous twin make the same swap decisions and agree on logits at every step."""
    paged = LLMEngine(*shipped, CacheConfig(block_size=4, num_blocks=18, seed=3),
                      SchedulerConfig(preemption_mode="swap", swap_space=64), attn_impl="gather")
    twin = LLMEngine(*shipped, CacheConfig(block_size=4, num_blocks=18, seed=3),
                     SchedulerConfig(preemption_mode="swap", swap_space=64), kv_layout="contiguous")
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    for p in PROMPTS:
        paged.add_request(p, params), twin.add_request(p, params)
    swaps = 0
    while paged.has_unfinished():
        tp, tc = paged.step(), twin.step()
        assert (tp.scheduled, tp.swap_out, tp.swap_in) == (tc.scheduled, tc.swap_out, tc.swap_in)
        for sid in tp.scheduled:
            want = twin.last_logits[sid]
            assert (paged.last_logits[sid] - want).abs().max().item() <= scaled_atol(want)
        swaps += len(tp.swap_out)
    assert swaps > 0 and not twin.has_unfinished()


def test_swap_mode_tokens_equal_transformers_generate(shipped, no_pressure):
    """Greedy tokens of the swap-mode run under pressure equal transformers' generate, prompt by prompt."""
    model, tok = shipped
    outs = run(model, tok, "swap", 18)[0]
    hf = hf_twin(model)
    for prompt, got in zip(PROMPTS, outs):
        ids = torch.tensor([tok.encode(prompt)])
        with torch.no_grad():
            want = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_TOKENS,
                               min_new_tokens=MAX_TOKENS, do_sample=False)[0, ids.shape[1]:].tolist()
        assert got == want


def test_abort_of_a_swapped_request_frees_its_swap_blocks(shipped):
    """Aborting a request while it waits in the swap pool returns its swap blocks; the others still finish."""
    model, tok = shipped
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=18, seed=3),
                       SchedulerConfig(preemption_mode="swap", swap_space=64), attn_impl="gather")
    ids = [engine.add_request(p, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)) for p in PROMPTS]
    while not (trace := engine.step()).swapped:
        pass
    victim = trace.swapped[0]
    assert engine.swapper.space.num_free_blocks < 64
    assert engine.abort(victim)
    assert engine.swapper.space.num_free_blocks == 64 and not engine.swapper.swapped
    while engine.has_unfinished():
        engine.step()
    assert engine.output(victim).finish_reason == "abort"
    assert all(engine.output(i).finished for i in ids) and engine.block_manager.num_free_blocks == engine.num_blocks


def test_a_failed_step_after_a_swap_out_is_rolled_back_and_the_victim_recomputed(shipped, no_pressure, monkeypatch):
    """A step that swaps out and then raises: rolled back, the swap pool whole again (its swap count too), the victim
    recomputed instead
    (its pool blocks may be overwritten); the run still ends with the unpressured tokens."""
    model, tok = shipped
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=18, seed=3),
                       SchedulerConfig(preemption_mode="swap", swap_space=64), attn_impl="gather")
    ids = [engine.add_request(p, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)) for p in PROMPTS]
    real_run, failed = engine.runner.run, []

    def run_once_failing(seqs, batch):
        if engine.swapper.out and not failed:
            failed.append(list(engine.swapper.out))
            raise RuntimeError("injected")
        return real_run(seqs, batch)

    monkeypatch.setattr(engine.runner, "run", run_once_failing)
    with pytest.raises(Exception, match="injected"):
        while engine.has_unfinished():
            engine.step()
    victim = failed[0][0]
    assert engine.swapper.space.num_free_blocks == 64 and victim in [s.seq_id for s in engine.scheduler.waiting]
    assert engine.sequences[victim].cached_token_count == 0 and engine.swapper.num_swaps == {}  # the swap undone
    while engine.has_unfinished():
        engine.step()
    assert [engine.output(i).token_ids for i in ids] == no_pressure
    assert engine.block_manager.num_free_blocks == engine.num_blocks


@pytest.mark.parametrize("prefix_caching, n", [(True, 1), (False, 2)])
def test_swap_with_prefix_caching_or_parallel_samples(shipped, prefix_caching, n):
    """Swap mode under pressure with prefix caching on (shared prompt heads), or with n = 2 seeded samples (blocks
    shared by siblings, each swapped on its own): every sample equals the unpressured run's; nothing leaked."""
    model, tok = shipped
    prompts = ["abcdefghijklmnop and", "abcdefghijklmnop or", "1 2 3 4 5 6", "Hello, paged world!"]
    params = SamplingParams(max_tokens=16, ignore_eos=True, n=n, temperature=1.0 if n > 1 else 0.0, seed=7)

    def samples(num_blocks, mode):
        engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=num_blocks, seed=3,
                                                   enable_prefix_caching=prefix_caching),
                           SchedulerConfig(preemption_mode=mode, swap_space=64), attn_impl="gather")
        ids = [engine.add_request(p, params) for p in prompts]
        swaps = 0
        while engine.has_unfinished():
            swaps += len(engine.step().swap_out)
        assert engine.block_manager.num_free_blocks == engine.num_blocks
        assert engine.swapper.space.num_free_blocks == 64
        return [engine.output(i).samples for i in ids], swaps

    free, _ = samples(400, "swap")
    tight, swaps = samples(16 if n == 1 else 22, "swap")
    assert swaps > 0 and tight == free
