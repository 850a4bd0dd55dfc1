"""Block sharing: prefix caching, parallel sampling by fork, copy-on-write — invariants and exact outputs."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.block_manager import BlockManager
from paged.config import CacheConfig, SamplingParams
from paged.engine import LLMEngine
from paged.engine.sampler import make_generator, sample
from paged.engine.twins import run_twins
from paged.sequence import Sequence

from helpers import prompt_logits_scale, scaled_atol, tiny_model

pytestmark = pytest.mark.article

MODEL, TOK = tiny_model()
PREFIX = "The KV cache lives in blocks. "


def engine(block_size=4, num_blocks=64, caching=True, **kw):
    return LLMEngine(MODEL, TOK, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=0, watermark=0.0,
                                             enable_prefix_caching=caching), attn_impl="gather", **kw)


def run_all(eng, prompts, params):
    ids = [eng.add_request(p, params) for p in prompts]
    traces = []
    while eng.has_unfinished():
        traces.append(eng.step())
    return [eng.output(i) for i in ids], traces


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_prefix_caching_on_equals_off(block_size):
    """Greedy outputs with prefix caching on equal those with it off, token for token, and blocks were reused."""
    prompts = [PREFIX + "alpha", PREFIX + "beta", PREFIX + "alpha", "unrelated", PREFIX]
    params = SamplingParams(max_tokens=10, ignore_eos=True)
    on_eng = engine(block_size, 256)
    on, hits = [], []
    for p in prompts:  # one at a time, so later prompts find earlier ones' blocks in the cache
        rid = on_eng.add_request(p, params)
        on_eng.step()  # its prefill: the hits are known while it holds blocks
        hits.append(sum(on_eng.block_manager.last_hits[rid]))
        on += run_all(on_eng, [], params)[0] + [on_eng.output(rid)]
    off = run_all(engine(block_size, 256, caching=False), prompts, params)[0]
    assert [o.token_ids for o in on] == [o.token_ids for o in off]
    assert max(hits) >= len(TOK.encode(PREFIX)) // block_size - 1
    assert on_eng.block_manager.num_free_blocks == on_eng.num_blocks
    assert on_eng.block_manager.last_hits == {}, "finished sequences' hits are dropped with their blocks"


def test_full_hit_still_computes_a_token_and_never_writes_shared_blocks():
    """The same prompt twice: the repeat reuses all but its last block, feeds >= 1 token and writes no shared slot."""
    eng = engine(4, 64)
    prompt = PREFIX[:15]  # BOS + 15 bytes = 16 tokens: an exact multiple of block_size
    first, _ = run_all(eng, [prompt], SamplingParams(max_tokens=3, ignore_eos=True))
    rid = eng.add_request(prompt, SamplingParams(max_tokens=3, ignore_eos=True))
    trace = eng.step()
    s = trace.seqs[0]
    assert eng.block_manager.last_hits[rid] == [True, True, True, False]
    assert len(s.tokens_in) == 4 and s.positions == [12, 13, 14, 15]  # the last block is recomputed
    table = trace.block_tables_after[rid]
    assert {slot // 4 for slot in s.slots} == {table[3]}, "wrote outside the sequence's private last block"
    while eng.has_unfinished():
        eng.step()
    assert eng.output(rid).token_ids == first[0].token_ids


def test_exact_multiple_prompt_hits_only_leading_blocks():
    """A prompt of exactly 2 blocks followed by a longer one sharing them: the longer one hits both."""
    eng = engine(4, 64)
    base = "abcdefg"  # 8 tokens with BOS
    run_all(eng, [base], SamplingParams(max_tokens=2, ignore_eos=True))
    rid = eng.add_request(base + "hijk", SamplingParams(max_tokens=2, ignore_eos=True))
    eng.step()
    assert eng.block_manager.last_hits[rid] == [True, True, False]
    assert eng.requests[rid].cached_token_count == 12  # 8 reused + 4 computed (BOS + 11 bytes)


def test_hash_collision_is_caught_by_token_comparison():
    """If a cached block's recorded tokens differ from the prompt's, it is not reused even when hashes match."""
    bm = BlockManager(8, 2, watermark=0.0, enable_prefix_caching=True)
    a = Sequence(0, [1, 2, 3, 4, 5])
    bm.allocate(a)
    bm.block_tokens[a.block_table[0]] = (9, 9)  # pretend a different prefix produced the same hash
    b = Sequence(1, [1, 2, 3, 4, 5])
    bm.allocate(b)
    assert bm.last_hits[1][0] is False and b.block_table[0] != a.block_table[0]


def test_evicted_hash_leaves_the_index():
    """A freed cached block keeps its hash until it is reused for other tokens; then the hash is gone."""
    bm = BlockManager(3, 2, watermark=0.0, enable_prefix_caching=True)
    a = Sequence(0, [1, 2, 3, 4, 5])  # blocks: [1,2] [3,4] [5]
    bm.allocate(a)
    full = a.block_table[:2]
    bm.free(a)
    assert all(b in bm.block_hash for b in full)
    c = Sequence(1, [7, 8, 9, 10, 11])  # needs all 3 blocks: evicts every cached one
    bm.allocate(c)
    assert all(bm.block_tokens.get(b) != (1, 2) for b in range(3))
    assert all(b in bm.cache.hash_blocks[bm.block_hash[b]] for b in bm.block_hash)
    bm.check_invariants()


def reference_sample(prompt, params, seed):
    """No cache at all: re-run the whole sequence each step, sample with the sample's own generator."""
    ids = TOK.encode(prompt)
    p = SamplingParams(max_tokens=params.max_tokens, temperature=params.temperature, top_k=params.top_k,
                       top_p=params.top_p, seed=seed, ignore_eos=True)
    g = make_generator(p)
    out = []
    for _ in range(params.max_tokens):
        with torch.no_grad():
            logits = MODEL(torch.tensor([ids + out]))[0, -1:]
        out += sample(logits, [p], [g])
    return out


@pytest.mark.parametrize("block_size", [4, 16])
def test_parallel_samples_never_see_each_other(block_size):
    """n=3 samples share the prompt's blocks and copy-on-write the shared last block; each sample equals an
    independent no-cache run with its own seed, so no child ever read another's token."""
    params = SamplingParams(max_tokens=12, temperature=1.0, top_k=40, seed=7, n=3, ignore_eos=True)
    prompt = "copy on write!"
    outs, traces = run_all(engine(block_size, 64), [prompt], params)
    samples = outs[0].samples
    assert len(samples) == 3 and len({tuple(s) for s in samples}) > 1
    if (len(TOK.encode(prompt)) % block_size) != 0:
        assert any(t.copies for t in traces), "a shared partly-filled block must be copied before writing"
    for i, s in enumerate(samples):
        assert s == reference_sample(prompt, params, 7 + i)


def test_parallel_sampling_paged_equals_contiguous_twin():
    """With prefix caching and n=2, the paged engine's samples equal the contiguous twin's exactly."""
    prompts = [PREFIX + "x", PREFIX + "y", PREFIX + "x"]
    run = run_twins(MODEL, TOK, prompts,
                    SamplingParams(max_tokens=8, temperature=0.9, seed=5, n=2, ignore_eos=True),
                    CacheConfig(block_size=4, num_blocks=96, seed=1, enable_prefix_caching=True), attn_impl="gather")
    assert [o.samples for o in run.paged] == [o.samples for o in run.contiguous] 
    assert run.max_diff < scaled_atol(prompt_logits_scale(MODEL, TOK, prompts), 1e-5)


def test_bad_n_and_abort_one_child():
    """n < 1 and n beyond the pool are clear errors; aborting one child leaves siblings running, no leak."""
    with pytest.raises(ValueError, match="n must"):
        SamplingParams(n=0)
    eng = engine(4, 12)
    with pytest.raises(ValueError, match="parallel samples could never run"):
        eng.add_request("hello", SamplingParams(max_tokens=20, n=4))
    rid = eng.add_request("hello", SamplingParams(max_tokens=6, n=3, temperature=1.0, seed=1, ignore_eos=True))
    eng.step()
    assert eng.abort(rid, sample=1) is True
    with pytest.raises(ValueError, match="samples 0..2"):
        eng.abort(rid, sample=5)
    eng.block_manager.check_invariants()
    while eng.has_unfinished():
        eng.step()
    out = eng.output(rid)
    assert len(out.samples[0]) == 6 and len(out.samples[2]) == 6 and len(out.samples[1]) == 1
    assert eng.block_manager.num_free_blocks == 12


PROMPTS = ["ab", "abcdefgh", "abcdefghij", "xyz", "abcdefghijklmnop"]
actions = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, len(PROMPTS) - 1), st.integers(1, 3)),
    st.tuples(st.just("step"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("abort"), st.integers(0, 30), st.integers(-1, 2)),
), min_size=1, max_size=18)


@settings(max_examples=25, deadline=None)
@given(actions=actions, block_size=st.sampled_from([2, 4]))
def test_sharing_interleavings_keep_invariants(actions, block_size):
    """Random add (shared prefixes, n in 1..3) / step / abort: ref count == tables holding the block, the hash index
    stays consistent, and after everything finishes no block leaks."""
    eng = LLMEngine(MODEL, TOK, CacheConfig(block_size=block_size, num_blocks=40, seed=2, watermark=0.0,
                                            enable_prefix_caching=True), attn_impl="gather")
    ids = []
    for kind, a, b in actions:
        if kind == "add":
            try:
                ids.append(eng.add_request(PROMPTS[a], SamplingParams(max_tokens=4, n=b, temperature=1.0, seed=a,
                                                                      ignore_eos=True)))
            except ValueError as err:
                assert "never" in str(err)
        elif kind == "step":
            for _ in range(a):
                eng.step()
        elif ids:
            rid = ids[a % len(ids)]
            sample = None if b < 0 else b % len(eng.groups[rid])
            eng.abort(rid, sample)
        bm = eng.block_manager
        bm.check_invariants()
        holders = [0] * bm.num_blocks
        for seq in eng.scheduler.running:
            for blk in seq.block_table:
                holders[blk] += 1
        assert holders == bm.ref_counts
    while eng.has_unfinished():
        eng.step()
    assert eng.block_manager.num_free_blocks == eng.num_blocks
