"""Property test: random add / step / abort never leaks a block and keeps the state rule."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.config import CacheConfig, ModelConfig, SamplingParams
from paged.engine import EngineStepError, LLMEngine
from paged.model import ByteTokenizer, TinyLlama

pytestmark = pytest.mark.engine

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


fail_actions = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 12), st.integers(1, 8)),
    st.tuples(st.just("step"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("abort"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("fail"), st.integers(0, 1), st.just(0)),
), min_size=1, max_size=20)


@settings(max_examples=30, deadline=None)
@given(actions=fail_actions, block_size=st.sampled_from([1, 2, 4]), caching=st.booleans())
def test_failing_steps_never_corrupt_the_engine(actions, block_size, caching):
    """"fail" makes the next step raise: in the model after its K/V writes (rolled back), or with NaN logits for
    the batch's last sequence (its request ends with "error"). The block manager stays consistent after every
    action, nothing leaks, and every request's tokens agree with a run where no step fails (one is a prefix of the
    other: aborts may land at different points once the schedules differ, and an ended request stops early)."""
    def run(inject: bool):
        engine = LLMEngine(MODEL, TOK, CacheConfig(block_size=block_size, num_blocks=24, watermark=0.0, seed=5,
                                                   enable_prefix_caching=caching), attn_impl="gather")
        real_model, real_run, armed = engine.runner.model, engine.runner.run, []

        def model(*args, **kwargs):
            out = real_model(*args, **kwargs)
            if armed == [0]:
                armed.clear()
                raise RuntimeError("injected")
            return out

        def run_batch(seqs, batch):
            logits = real_run(seqs, batch)
            if armed == [1]:
                armed.clear()
                logits = logits.clone()
                logits[-1, 0] = float("nan")
            return logits
        engine.runner.model, engine.runner.run = model, run_batch
        ids = []
        for kind, a, b in actions:
            if kind == "add":
                params = SamplingParams(max_tokens=b, ignore_eos=True, temperature=0.0 if a % 2 else 0.8, seed=a)
                try:
                    ids.append(engine.add_request("q" * a, params))
                except ValueError:
                    pass
            elif kind == "step":
                for _ in range(a):
                    try:
                        engine.step()
                    except EngineStepError:
                        pass
            elif kind == "abort" and ids:
                engine.abort(ids[a % len(ids)])
            elif kind == "fail" and inject:
                armed[:] = [a]
            engine.block_manager.check_invariants()
        while engine.has_unfinished():
            try:
                engine.step()
            except EngineStepError:
                pass
        assert engine.block_manager.num_free_blocks == engine.num_blocks
        return [engine.output(i).token_ids for i in ids]

    for got, clean in zip(run(True), run(False), strict=True):
        n = min(len(got), len(clean))
        assert got[:n] == clean[:n]
