"""Property test: random add / step / abort never leaks a block and keeps the state rule."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.config import CacheConfig, ModelConfig, SamplingParams
from paged.engine import LLMEngine
from paged.model import ByteTokenizer, TinyLlama

torch.manual_seed(0)
MODEL = TinyLlama(ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              num_key_value_heads=1, max_position_embeddings=128)).eval()
TOK = ByteTokenizer()

actions = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 12), st.integers(1, 10)),
    st.tuples(st.just("step"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("abort"), st.integers(0, 20), st.just(0)),
), min_size=1, max_size=20)


@settings(max_examples=40, deadline=None)
@given(actions=actions, block_size=st.sampled_from([1, 2, 4]))
def test_random_add_step_abort(actions, block_size):
    """Invariants hold after every action; once everything finishes or is aborted, every block is free."""
    engine = LLMEngine(MODEL, TOK, CacheConfig(block_size=block_size, num_blocks=24, watermark=0.0),
                       attn_impl="gather")
    ids = []
    for kind, a, b in actions:
        if kind == "add":
            try:
                ids.append(engine.add_request("z" * a, SamplingParams(max_tokens=b, ignore_eos=True)))
            except ValueError as err:  # too big for this pool: must be refused up front, never queued
                assert "never fit" in str(err)
        elif kind == "step":
            for _ in range(a):
                engine.step()
        elif ids:
            engine.abort(ids[a % len(ids)])
        bm = engine.block_manager
        bm.check_invariants()
        for seq in engine.scheduler.running:
            assert seq.cached_token_count == seq.num_tokens - 1
            assert len(seq.block_table) * block_size >= seq.cached_token_count
        held = sum(len(s.block_table) for s in engine.scheduler.running)
        assert held + bm.num_free_blocks == bm.num_blocks
    while engine.has_unfinished():
        engine.step()
    assert engine.block_manager.num_free_blocks == engine.num_blocks
    for rid in ids:
        out = engine.output(rid)
        assert out.finished and (out.finish_reason == "abort" or out.finish_reason == "length")
