"""A failed step is undone through a journal of what it changed (engine/checkpoint.py): the free queue comes back
in the same order, the ref counts, tables and prefix-cache index as they were; and no step walks or copies the
pool-sized structures to get there."""

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.config import CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from paged.engine import EngineStepError, LLMEngine
from paged.model import ByteTokenizer, TinyLlama
from paged.prefix_cache import FreeBlockQueue, PrefixCache

pytestmark = pytest.mark.engine

torch.manual_seed(0)
MODEL = TinyLlama(ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              num_key_value_heads=1, max_position_embeddings=128)).eval()
TOK = ByteTokenizer()


def pool_state(engine) -> dict:
    """The pool's bookkeeping as independent plain values: tables, free queue in order, ref counts, the index."""
    bm = engine.block_manager
    return copy.deepcopy(dict(tables=dict(bm.tables), free=list(bm.free_block_ids), refs=list(bm.ref_counts),
                              index={h: list(b) for h, b in bm.cache.hash_blocks.items()},
                              hashes=dict(bm.cache.block_hash), tokens=dict(bm.cache.block_tokens),
                              seqs={sid: (s.cached_token_count, list(s.generated_token_ids), s.status,
                                          list(s.block_table)) for sid, s in engine.sequences.items()}))


def without_evicted(before: dict, hashes_at_failure: dict) -> dict:
    """`before` less the cache entries of blocks whose entry the failed step changed (it took them for new
    contents, so the K/V their hash named may be gone): the one part of the index a rollback keeps."""
    gone = {b for b, h in before["hashes"].items() if hashes_at_failure.get(b) != h}
    out = copy.deepcopy(before)
    out["hashes"] = {b: h for b, h in before["hashes"].items() if b not in gone}
    out["tokens"] = {b: t for b, t in before["tokens"].items() if b not in gone}
    index = {h: [b for b in blocks if b not in gone] for h, blocks in before["index"].items()}
    out["index"] = {h: blocks for h, blocks in index.items() if blocks}
    return out


steps = st.lists(st.tuples(
    st.one_of(st.none(), st.tuples(st.integers(1, 14), st.integers(1, 8))),  # a request added before the step
    st.sampled_from([None, None, "model", "release", "stop"]),  # where the step raises (None: it does not)
    st.one_of(st.none(), st.integers(0, 20)),  # a request aborted after it
), min_size=3, max_size=20)


@settings(max_examples=40, deadline=None)
@given(steps=steps, block_size=st.sampled_from([1, 2, 4]), caching=st.booleans(), chunked=st.booleans(),
       n=st.sampled_from([1, 2]))
def test_a_failed_step_restores_the_pool_exactly(steps, block_size, caching, chunked, n):
    """Random requests (some forking n samples, some sharing a prefix), steps and aborts; most steps raise at one
    of three points: in the model (blocks taken, copy-on-write done), while releasing a finished sequence (blocks
    back on the free queue), or after the update (children forked). Unless the failed step preempted someone
    (those stay preempted), the pool after the rollback equals a deep copy taken before the step: tables, the free
    queue's order, ref counts, and the index less the blocks the step took for new contents."""
    engine = LLMEngine(MODEL, TOK, CacheConfig(block_size=block_size, num_blocks=20, watermark=0.0, seed=3,
                                               enable_prefix_caching=caching),
                       SchedulerConfig(enable_chunked_prefill=chunked, max_num_batched_tokens=16 if chunked else 64),
                       attn_impl="gather")
    armed, seen = [], {}
    real_model, real_release, real_stop = engine.runner.model, engine.runner.release, engine.stop_reason

    def fail_if(point: str) -> None:
        if armed == [point]:
            armed.clear()
            seen["hashes"] = dict(engine.block_manager.cache.block_hash)
            raise RuntimeError(f"injected in {point}")

    def model(*args, **kwargs):
        out = real_model(*args, **kwargs)
        fail_if("model")
        return out

    def release(seq_id):
        real_release(seq_id)
        fail_if("release")

    def stop_reason(seq):
        reason = real_stop(seq)
        fail_if("stop")
        return reason

    engine.runner.model, engine.runner.release, engine.stop_reason = model, release, stop_reason
    ids = []
    for add, fail, abort in steps:
        if add is not None:
            length, max_tokens = add
            prompt = "shared prefix!"[:length] if length % 2 else "q" * length
            try:
                ids.append(engine.add_request(prompt, SamplingParams(max_tokens=max_tokens, ignore_eos=True,
                                                                     n=n if length % 3 == 0 else 1)))
            except ValueError:  # too big for this pool: refused up front
                pass
        before = pool_state(engine)
        seen.clear()
        armed[:] = [fail] if fail else []  # armed during this step only (an abort also releases)
        try:
            engine.step()
        except EngineStepError as err:
            if "stay preempted" not in str(err):
                assert pool_state(engine) == without_evicted(before, seen["hashes"])
        armed.clear()
        engine.block_manager.check_invariants()
        if abort is not None and ids:
            engine.abort(ids[abort % len(ids)])


def test_the_rollback_equality_is_exact_where_it_can_be_checked():
    """One hand-built case of the property above: a finished request's blocks are released (to the head of the free
    queue), then the step raises; after the rollback the queue is the same list in the same order."""
    engine = LLMEngine(MODEL, TOK, CacheConfig(block_size=2, num_blocks=12, watermark=0.0, seed=7),
                       attn_impl="gather")
    engine.add_request("abc", SamplingParams(max_tokens=2, ignore_eos=True))
    engine.add_request("defgh", SamplingParams(max_tokens=5, ignore_eos=True))
    engine.step()
    before = pool_state(engine)
    real = engine.runner.release

    def release(seq_id):
        real(seq_id)
        raise RuntimeError("after the release")

    engine.runner.release = release
    with pytest.raises(EngineStepError, match="after the release"):
        engine.step()
    assert pool_state(engine) == before
    assert before["free"] != sorted(before["free"])  # a shuffled queue: its order is what is compared


def test_undo_puts_every_free_queue_change_back_in_order():
    """Takes from the head, removals from the middle, puts at both ends and moves to the front, journalled, then
    undone: the same blocks in the same order; the journal holds one record per change, not the pool."""
    q = FreeBlockQueue([5, 2, 7, 0, 3, 9, 1])
    start = list(q)
    q.start_journal()
    a, b = q.take(), q.take()
    del q[0]
    q.put_front([a])
    q.put_back([b, 0])
    q.move_to_front([9, 3], 10)
    assert list(q) == [9, 3, 5, 7, 1, 2, 0]
    assert len(q.journal) == 10  # 3 removals, 3 inserts, 2 moves of 2 records each, counted by hand
    q.undo()
    assert list(q) == start and q.journal is None and len(q) == 7 and 4 not in q and 5 in q


def test_undo_of_the_index_restores_filing_order_and_keeps_evictions():
    """A block filed during the journal goes; an evicted block stays evicted; a second block under the same hash
    keeps its place behind the first (rule 5)."""
    cache = PrefixCache()
    cache.add(11, 1, (1,))
    cache.add(11, 2, (1,))
    cache.add(22, 3, (2,))
    cache.start_journal()
    cache.evict(1)
    cache.add(44, 1, (9,))  # block 1 taken for other tokens: its old entry is gone for good
    cache.add(33, 4, (3,))
    cache.evict(3)
    cache.undo()
    cache.check()
    assert cache.hash_blocks == {11: {2: None}} and cache.block_hash == {2: 11}
    assert cache.block_tokens == {2: (1,)}


def test_a_step_never_walks_or_copies_the_pool_sized_structures(monkeypatch):
    """With the free queue's iteration and copy, and the index's copy, made to fail, requests run to the end with
    prefix caching on (hits, evictions and frees included) and the ref counts stay one list object: each step's
    bookkeeping touches only the blocks it changes."""
    engine = LLMEngine(MODEL, TOK, CacheConfig(block_size=2, num_blocks=64, watermark=0.0, enable_prefix_caching=True),
                       attn_impl="gather")
    engine.add_request("the same start, then a", SamplingParams(max_tokens=6, ignore_eos=True))
    engine.step()
    refs = engine.block_manager.ref_counts

    def refuse(*args):
        raise AssertionError("a step walked or copied a pool-sized structure")

    monkeypatch.setattr(FreeBlockQueue, "__iter__", refuse)
    monkeypatch.setattr(FreeBlockQueue, "copy", refuse)
    monkeypatch.setattr(PrefixCache, "copy", refuse)
    for prompt in ("the same start, then b", "the same start, then c"):
        engine.add_request(prompt, SamplingParams(max_tokens=6, ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    assert engine.block_manager.ref_counts is refs and sum(refs) == 0
    assert engine.block_manager.num_free_blocks == 64
