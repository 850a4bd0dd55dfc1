"""EngineView: what the pages draw, as values taken from the engine after a step (no page reads engine internals)."""

import dataclasses

import pytest

from paged.addressing import blocks_needed
from paged.config import CacheConfig, SamplingParams
from paged.engine import LLMEngine
from paged.engine.view import engine_view
from paged.model import ByteTokenizer

from helpers import tiny_model

pytestmark = pytest.mark.engine

MODEL = tiny_model()[0]
PREFIX = "Shared prefix of two blocks. "


def test_view_agrees_with_the_state_rule_and_the_pool_step_by_step():
    """After every step: each running table holds exactly the blocks its cached tokens need, ref counts equal the
    tables' references, free = num_blocks - held, and queues partition the sequences."""
    eng = LLMEngine(MODEL, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=48, seed=1, watermark=0.0,
                                                        enable_prefix_caching=True), attn_impl="gather")
    eng.add_request(PREFIX + "one", SamplingParams(max_tokens=6, ignore_eos=True))
    eng.add_request(PREFIX + "two", SamplingParams(max_tokens=4, ignore_eos=True, n=3, temperature=1.0, seed=2))
    steps = 0
    while eng.has_unfinished():
        eng.step()
        steps += 1
        view = engine_view(eng)
        assert view.step == steps
        refs = [0] * view.num_blocks
        for sid, table in view.tables.items():
            seq = view.seqs[sid]
            assert seq.status == "running" and table == seq.block_table
            assert len(table) == blocks_needed(seq.cached_token_count, view.block_size)
            for b in table:
                refs[b] += 1
        assert list(view.ref_counts) == refs
        assert view.num_free_blocks == view.num_blocks - view.held_blocks
        assert sorted(view.waiting + view.running + view.finished) == sorted(view.seqs)
        assert view.shared_saved == sum(refs) - sum(1 for r in refs if r)
    groups = engine_view(eng).groups
    assert sorted(len(g) for g in groups.values()) == [1, 3]  # the n=3 request forked two samples
    assert all(engine_view(eng).seqs[sid].request_id == rid for rid, ids in groups.items() for sid in ids)


def test_view_is_a_snapshot_not_a_window():
    """A view keeps the values it was built with while the engine moves on, and cannot be edited."""
    eng = LLMEngine(MODEL, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=32, seed=0), attn_impl="gather")
    eng.add_request("hello there", SamplingParams(max_tokens=3, ignore_eos=True))
    eng.step()
    first = engine_view(eng)
    cached = first.cached_counts
    while eng.has_unfinished():
        eng.step()
    assert first.cached_counts == cached and first.running and not engine_view(eng).running
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.step = 99


def test_ownership_is_built_by_the_view_not_by_each_step(monkeypatch):
    """A step computes no UI-only ownership map (the trace has none); the view builds it on demand: a free block
    has no owner, a held one names a sequence whose table holds it, and a shared (forked) block names the parent."""
    eng = LLMEngine(MODEL, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=24, seed=3, watermark=0.0),
                    attn_impl="gather")
    rid = eng.add_request("forked prompt", SamplingParams(max_tokens=3, ignore_eos=True, n=2, temperature=1.0, seed=1))
    eng.add_request("other", SamplingParams(max_tokens=5, ignore_eos=True))

    def boom(*args, **kwargs):
        raise AssertionError("ownership computed on the engine's step")

    monkeypatch.setattr(eng.block_manager, "ownership", boom)
    trace = eng.step()
    assert not hasattr(trace, "ownership")
    view = engine_view(eng)
    owners = view.ownership
    exported = trace.to_dict()["ownership"]  # the export derives it from the tables after the step
    assert [o is None for o in exported] == [o is None for o in owners]
    assert all(o is None or b in view.tables[o] for b, o in enumerate(exported))
    assert len(owners) == 24
    for block, owner in enumerate(owners):
        assert (owner is None) == (view.ref_counts[block] == 0)
        assert owner is None or block in view.tables[owner]
    child = view.groups[rid][1]
    shared = set(view.tables[rid]) & set(view.tables[child])
    assert shared and all(owners[b] == rid for b in shared)


@pytest.mark.parametrize("chunked", [False, True])
def test_context_len_is_what_attention_read_this_step(chunked):
    """One meaning of context_len: the tokens attention read for the sequence in this step, its own fed tokens
    included: the last fed position + 1, i.e. cached_token_count after the step (in decode: before + 1)."""
    from paged.config import SchedulerConfig

    sc = SchedulerConfig(enable_chunked_prefill=True, max_num_batched_tokens=8) if chunked else SchedulerConfig()
    eng = LLMEngine(MODEL, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=48, seed=1, watermark=0.0), sc,
                    attn_impl="gather")
    eng.add_request("a prompt longer than one chunk", SamplingParams(max_tokens=4, ignore_eos=True))
    eng.add_request("short", SamplingParams(max_tokens=6, ignore_eos=True))
    seen = 0
    while eng.has_unfinished():
        for s in eng.step().seqs:
            if s.tokens_in:
                assert s.context_len == s.positions[-1] + 1 == s.cached_token_count
                seen += 1
    assert seen >= 10
