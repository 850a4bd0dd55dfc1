"""The engine with a sliding window (paged/engine/windowing.py): the paged engine's tokens equal the contiguous
twin's (every token kept, the window a mask) for whole and chunked prefill, preemption and prefix caching; the
blocks behind the window are freed while sequences run, shown in the StepTrace, and none leaks."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.window_engine import window_engine
from paged.engine.windowing import held_blocks, with_window
from paged.chapters.window import HOLE

pytestmark = pytest.mark.engine

PROMPTS = ["blocks of KV\u0102", "the window slides"]  # \u0102: any non-ASCII char keeps the byte path honest


def run(model, tokenizer, window, block_size, layout="paged", chunked=False, num_blocks=48, caching=False,
        prompts=PROMPTS, max_tokens=12, impl=None):
    """Generate greedily with `window`; returns (token ids per prompt, the traces, the engine)."""
    engine = LLMEngine(with_window(model, window), tokenizer,
                       CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=0,
                                   enable_prefix_caching=caching),
                       SchedulerConfig(enable_chunked_prefill=chunked, max_num_batched_tokens=8 if chunked else 2048),
                       kv_layout=layout, attn_impl=impl)
    ids = [engine.add_request(p, SamplingParams(max_tokens=max_tokens, ignore_eos=True)) for p in prompts]
    traces = []
    while engine.has_unfinished():
        traces.append(engine.step())
    return [engine.output(i).token_ids for i in ids], traces, engine


@pytest.mark.parametrize("window,block_size,chunked", [(5, 2, False), (8, 4, True), (40, 16, False)])
def test_paged_tokens_equal_the_contiguous_twin_and_blocks_stay_bounded(shipped, window, block_size, chunked):
    """Paged == contiguous twin, token for token; between steps no running sequence holds more than
    ceil(W / bs) + 1 blocks (read from the trace), the freed blocks are holes afterwards, and the pool is whole
    again at the end."""
    paged, traces, engine = run(*shipped, window, block_size, chunked=chunked)
    twin, _, _ = run(*shipped, window, block_size, layout="contiguous", chunked=chunked)
    assert paged == twin
    bound = math.ceil(window / block_size) + 1
    assert max(n for t in traces for n in held_blocks(t).values()) <= bound
    freed = [(t, sid, blocks) for t in traces for sid, blocks in t.window_freed.items()]
    if window < 16:  # the prompts and their 12 tokens outgrow a short window: blocks are freed on the way
        assert freed
    for trace, sid, blocks in freed:
        after = trace.block_tables_after[sid]
        assert all(b not in after for b in blocks) and after[0] == HOLE
    assert engine.block_manager.num_free_blocks == engine.num_blocks


def test_the_window_changes_the_output(shipped):
    """A window shorter than the prompt changes the greedy tokens of the recall model (it cannot read back far
    enough); one longer than prompt + output gives exactly full attention's."""
    full, _, _ = run(*shipped, None, 4, prompts=PROMPTS[:1])
    short, _, _ = run(*shipped, 4, 4, prompts=PROMPTS[:1])
    long_, _, _ = run(*shipped, 64, 4, prompts=PROMPTS[:1])
    assert short != full and long_ == full


def test_preemption_and_prefix_caching_keep_the_twins_equal(shipped):
    """A pool too small for both prompts at once (preemption by recompute) and, separately, prefix caching over
    two prompts sharing a long prefix: the paged tokens still equal the contiguous twin's, nothing leaks."""
    small, traces, engine = run(*shipped, 6, 2, num_blocks=7, prompts=["ab", "cd"], max_tokens=11)
    assert any(t.preempted for t in traces)  # 2 x (ceil(6 / 2) + 1) blocks may be wanted, 7 exist
    twin, _, _ = run(*shipped, 6, 2, layout="contiguous", num_blocks=7, prompts=["ab", "cd"], max_tokens=11)
    assert small == twin and engine.block_manager.num_free_blocks == 7
    model, tokenizer = shipped
    engine = LLMEngine(with_window(model, 6), tokenizer,
                       CacheConfig(block_size=2, num_blocks=48, watermark=0, enable_prefix_caching=True))
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    engine.generate(["window window window ab"], params)  # its blocks stay cached once it is done
    rid = engine.add_request("window window window cd", params)
    prefill = engine.step()
    fed, prompt_len = len(prefill.seqs[0].tokens_in), len(engine.output(rid).prompt_token_ids)
    assert fed < prompt_len - 6  # resumed from a window's worth of cached blocks, the rest holes
    while engine.has_unfinished():
        engine.step()
    twin, _, _ = run(*shipped, 6, 2, layout="contiguous", prompts=["window window window cd"], max_tokens=8)
    assert engine.output(rid).token_ids == twin[0]
    engine.block_manager.check_invariants()


def test_loop_impl_equals_gather(shipped):
    """The teaching loop and the batched gather give the same tokens with a window."""
    assert run(*shipped, 5, 2, impl="loop")[0] == run(*shipped, 5, 2, impl="gather")[0]


def test_freeing_one_block_too_early_drifts_from_the_twin(shipped):
    """The break-it (free_early): the block the window starts in goes back to the free queue while the table
    still lists it; the next block taken overwrites it and the paged tokens leave the contiguous twin's."""
    model, tokenizer = shipped
    twin, _, _ = run(model, tokenizer, 6, 2, layout="contiguous", prompts=PROMPTS[:1])
    engine = window_engine(model, tokenizer, 6, CacheConfig(block_size=2, num_blocks=48, watermark=0),
                           free_early=True)
    out = engine.generate(PROMPTS[:1], SamplingParams(max_tokens=12, ignore_eos=True))[0].token_ids
    assert out != twin


def test_kernels_without_a_window_and_faults_are_refused(shipped):
    """attn_impl 'native' / 'fused' have no window: a ValueError naming the impl, not a wrong answer; a fault
    likewise (the window's break-it is its own)."""
    model, tokenizer = shipped
    for impl in ("native", "fused"):
        with pytest.raises(ValueError, match=f"'{impl}' has no sliding window"):
            LLMEngine(with_window(model, 4), tokenizer, attn_impl=impl)
    with pytest.raises(ValueError, match="faults are not injected"):
        LLMEngine(with_window(model, 4), tokenizer, fault="early_increment")
    assert model.config.sliding_window is None  # with_window never touched the shared model


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=hst.integers(1, 12), block_size=hst.sampled_from([1, 2, 4]), chunked=hst.booleans(),
       caching=hst.booleans(), lens=hst.lists(hst.integers(1, 20), min_size=1, max_size=3),
       max_tokens=hst.integers(1, 8), spare=hst.integers(0, 12))
def test_any_schedule_keeps_the_twins_equal_and_the_bound(shipped, window, block_size, chunked, caching, lens,
                                                          max_tokens, spare):
    """Random windows, block sizes, prompts (sharing a prefix), chunked prefill, prefix caching and pools tight
    enough to preempt: paged tokens == contiguous twin's, every running sequence holds <= ceil(W / bs) + 1 blocks
    at the end of every step, and the pool is whole at the end."""
    prompts = [[256] + [97 + (i * 7 + j) % 26 for j in range(n)] for i, n in enumerate(lens)]
    prompts = [p[:3] + [120] + p[3:] if k % 2 else p for k, p in enumerate(prompts)]  # some shared starts
    num_blocks = max(-(-(len(p) + max_tokens) // block_size) for p in prompts) + spare
    out = {}
    for layout in ("paged", "contiguous"):
        tokens, traces, engine = run(*shipped, window, block_size, layout=layout, chunked=chunked,
                                     num_blocks=num_blocks, caching=caching and layout == "paged",
                                     prompts=prompts, max_tokens=max_tokens)
        out[layout] = tokens
        bound = math.ceil(window / block_size) + 1
        assert all(n <= bound for t in traces for n in held_blocks(t).values())
        assert engine.block_manager.num_free_blocks == engine.num_blocks
    assert out["paged"] == out["contiguous"]


def test_parallel_samples_share_and_slide_like_the_twin(shipped):
    """n = 3 samples (forked blocks, copy-on-write of the shared last block, each sample's window sliding over
    blocks its siblings still hold): the same samples as the contiguous twin, nothing leaked."""
    model, tokenizer = shipped
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=3, n=3, ignore_eos=True)
    samples = {}
    for layout in ("paged", "contiguous"):
        engine = window_engine(model, tokenizer, 5, CacheConfig(block_size=2, num_blocks=40, watermark=0),
                               kv_layout=layout)
        samples[layout] = engine.generate(["hello there friend"], params)[0].samples
        assert engine.block_manager.num_free_blocks == 40
    assert samples["paged"] == samples["contiguous"] and len({tuple(s) for s in samples["paged"]}) > 1
