"""The state rule mid-prefill: after every chunk of a chunked prefill, cached_token_count equals the tokens whose
K/V have been written so far, and those are exactly the sequence's first cached_token_count tokens.

The engine test counts the written tokens from the StepTraces (the positions and slots each step wrote), not from
the Sequence's own counter."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.sequence import Sequence

from helpers import tiny_model

pytestmark = pytest.mark.article


@settings(max_examples=80, deadline=None)
@given(prompt_len=st.integers(2, 200), data=st.data())
def test_each_chunk_adds_exactly_its_tokens(prompt_len, data):
    """Feeding a prompt in chunks of any sizes: after each non-final chunk cached_token_count is the sum of the
    chunks so far and the rest is uncached; the final chunk completes the prompt and samples the first token."""
    seq = Sequence(0, [3] * prompt_len)
    written = 0
    while prompt_len - written > 1 and data.draw(st.booleans(), label="another chunk"):
        n = data.draw(st.integers(1, prompt_len - written - 1), label="chunk")
        seq.on_chunk_done(n)
        written += n
        assert (seq.cached_token_count, seq.num_uncached_tokens) == (written, prompt_len - written)
        assert seq.generated_token_ids == [], "a non-final chunk samples nothing"
    seq.on_prefill_done(9)
    assert (seq.cached_token_count, seq.generated_token_ids, seq.num_uncached_tokens) == (prompt_len, [9], 1)


@pytest.mark.parametrize("n", [1, 16, 17, 40])
def test_one_chunk_of_n_tokens(n):
    """A single chunk of n tokens (small, a block's worth of 16, over 16) caches exactly n."""
    seq = Sequence(0, list(range(n + 5)))
    seq.on_chunk_done(n)
    assert (seq.cached_token_count, seq.num_uncached_tokens) == (n, 5)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


@pytest.mark.parametrize("budget, block_size", [(24, 4), (17, 16), (40, 8), (7, 2)])
def test_cached_count_equals_tokens_written_after_every_chunk(tiny, budget, block_size):
    """Chunked prefill of long prompts beside decodes: after every step, each scheduled sequence's
    cached_token_count equals the number of its tokens whose K/V the steps so far wrote (counted from the traces),
    each token was written once, at the slot its block table gives, and they are its first cached_token_count."""
    model, tok = tiny
    eng = LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=200, watermark=0.0, seed=2),
                    SchedulerConfig(max_num_batched_tokens=budget, enable_chunked_prefill=True), attn_impl="gather")
    rng = random.Random(budget)
    params = SamplingParams(max_tokens=4, ignore_eos=True)
    eng.add_request([rng.randrange(256) for _ in range(5)], params)
    traces = [eng.step()]  # a short prompt first: the long ones are chunked beside its decodes
    for n in (70, 45, 3, 90):
        eng.add_request([rng.randrange(256) for _ in range(n)], params)
    while eng.has_unfinished():
        traces.append(eng.step())
    written: dict[int, list[int]] = {}  # seq id -> positions whose K/V some step wrote, in write order
    chunks_seen = 0
    for t in traces:
        assert not t.preempted, "the pool is large enough: nothing is recomputed"
        for s in t.seqs:
            pos = written.setdefault(s.seq_id, [])
            table = t.block_tables_after.get(s.seq_id)
            for p, slot in zip(s.positions, s.slots):
                assert slot >= 0, f"seq {s.seq_id}: token {p} was fed but not written"
                if table is not None:
                    assert slot == table[p // block_size] * block_size + p % block_size
                pos.append(p)
            assert s.cached_token_count == len(pos), (
                f"step {t.step}, seq {s.seq_id}: cached_token_count {s.cached_token_count}, {len(pos)} tokens written")
            assert sorted(pos) == list(range(len(pos))), f"seq {s.seq_id}: a token written twice, or a gap"
            chunks_seen += s.token_out is None
    assert chunks_seen >= 4, "the prompts were not split into chunks"
