"""The state rule: cached_token_count = K/V written; generated_token_ids = tokens sampled."""

import pytest

from paged.sequence import Sequence, SequenceStatus

pytestmark = pytest.mark.article


def test_prefill_then_decode_counts():
    """After prefill cached == prompt_len with one generated token; each decode step adds exactly one to each."""
    seq = Sequence(0, [1, 2, 3, 4, 5])
    assert seq.cached_token_count == 0 and seq.num_uncached_tokens == 5
    seq.on_prefill_done(42)
    assert seq.cached_token_count == 5 and seq.generated_token_ids == [42] and seq.num_tokens == 6
    for step in range(1, 6):
        assert seq.num_uncached_tokens == 1, "decode feeds exactly the last generated token"
        seq.on_decode_done(100 + step)
        assert seq.cached_token_count == 5 + step and len(seq.generated_token_ids) == 1 + step
    assert seq.last_token_id == 105 and seq.token_ids[-2:] == [104, 105]


def test_recompute_refeeds_generated_tokens():
    """After preemption by recompute, the next prefill re-feeds prompt + generated, then continues the rule."""
    seq = Sequence(0, [1, 2, 3])
    seq.on_prefill_done(7)
    seq.on_decode_done(8)
    seq.block_table = [4]
    seq.reset_for_recompute()
    assert seq.cached_token_count == 0 and seq.block_table == [] and seq.status is SequenceStatus.WAITING
    assert seq.num_uncached_tokens == 5
    seq.on_prefill_done(9)
    assert seq.cached_token_count == 5 and seq.generated_token_ids == [7, 8, 9]


def test_decode_without_prefill_is_an_invariant_violation():
    """on_decode_done demands exactly one uncached token (catches a skipped prefill)."""
    seq = Sequence(0, [1, 2, 3])
    with pytest.raises(AssertionError):
        seq.on_decode_done(1)


def test_derived_properties():
    """blocks needed and last-block fill follow num_tokens and cached_token_count."""
    seq = Sequence(3, list(range(10)))
    assert seq.blocks_needed(4) == 3 and seq.last_block_fill(4) == 0
    seq.block_table = [7, 2, 9]
    seq.on_prefill_done(1)
    assert seq.last_block_fill(4) == 2 and seq.blocks_needed(4) == 3
    with pytest.raises(ValueError, match="empty"):
        Sequence(1, [])


def test_bookkeeping_fields_are_typed_with_defaults():
    """A bare sequence answers its own request as sample 0, never preempted, forking into nothing; the engine's
    bookkeeping lives in typed fields (no free-form dict)."""
    seq = Sequence(3, [1, 2])
    assert (seq.request_id, seq.sample_index, seq.params, seq.generator, seq.preemptions, seq.n) == (
        3, 0, None, None, 0, 1)
    assert not hasattr(seq, "extra")
    child = Sequence(4, [1, 2], request_id=3, sample_index=1)
    assert (child.request_id, child.sample_index) == (3, 1)
    with pytest.raises(ValueError, match="request_id must be an integer"):
        Sequence(5, [1], request_id=True)


def test_a_step_failing_after_a_fork_is_retried_and_forks_again(monkeypatch):
    """The rollback restores the parent's `n`: a step that forks 3 samples and then raises is retried and forks
    them again (without the restore the parent would believe it had forked, and the request would get 1 sample)."""
    import torch

    from paged.config import CacheConfig, ModelConfig, SamplingParams
    from paged.engine import EngineStepError, LLMEngine
    from paged.model import ByteTokenizer, TinyLlama

    torch.manual_seed(0)
    model = TinyLlama(ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, max_position_embeddings=64)).eval()
    engine = LLMEngine(model, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=32, watermark=0.0),
                       attn_impl="gather")
    rid = engine.add_request("fork", SamplingParams(max_tokens=3, n=3, temperature=1.0, seed=1, ignore_eos=True))
    real, calls = engine.stop_reason, []

    def fails_once_on_a_child(seq):
        if seq.sample_index > 0 and not calls:
            calls.append(seq.seq_id)
            raise RuntimeError("simulated failure after the fork")
        return real(seq)

    monkeypatch.setattr(engine, "stop_reason", fails_once_on_a_child)
    with pytest.raises(EngineStepError):
        engine.step()
    assert calls and engine.requests[rid].n == 3 and len(engine.groups[rid]) == 1
    while engine.has_unfinished():
        engine.step()
    out = engine.output(rid)
    assert len(out.samples) == 3 and all(len(s) == 3 for s in out.samples)
