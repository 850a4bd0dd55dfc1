"""Beam search on shared blocks (paged/engine/beam.py): transformers' beam search token for token, the contiguous twin,
the block tree's forks / copies / frees, the break-it and the refusals."""

from __future__ import annotations

import pytest
import torch

from paged.engine.beam import BeamSearch
from paged.engine.beam_group import BeamParams
from paged.config import CacheConfig, SchedulerConfig
from paged.model.tokenizer import EOS, SEP

pytestmark = pytest.mark.engine

PROMPTS = ["no", "xy", "hello world"]  # recall prompts: some beams end on EOS, so the length penalty matters
MAX_TOKENS = 6


@pytest.fixture(scope="module")
def hf_model():
    transformers = pytest.importorskip("transformers")
    from paged.model.io import DEFAULT_DIR
    return transformers.LlamaForCausalLM.from_pretrained(DEFAULT_DIR, attn_implementation="eager").eval()


def recall(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text) + [SEP]


@torch.no_grad()
def hf_beams(hf_model, ids: list[int], k: int, length_penalty: float) -> tuple[list[list[int]], torch.Tensor]:
    """transformers' K finished beams (each cut after its EOS, the padding after it dropped) and their scores."""
    out = hf_model.generate(torch.tensor([ids]), num_beams=k, num_return_sequences=k, do_sample=False,
                            early_stopping=True, length_penalty=length_penalty, max_new_tokens=MAX_TOKENS,
                            return_dict_in_generate=True, output_scores=True, pad_token_id=EOS, eos_token_id=EOS)
    rows = [r[:r.index(EOS) + 1] if EOS in r else r for r in out.sequences[:, len(ids):].tolist()]
    return rows, out.sequences_scores


def search(model, tokenizer, ids, k, lp=1.0, layout="paged", num_blocks=64, skip_cow=False, **cache):
    engine = BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=num_blocks, **cache),
                        SchedulerConfig(max_num_batched_tokens=8, enable_chunked_prefill=True), kv_layout=layout,
                        skip_cow=skip_cow)
    return engine.run(ids, BeamParams(beam_width=k, length_penalty=lp, max_tokens=MAX_TOKENS))


@pytest.mark.parametrize("k", [2, 4, 6])
def test_beams_equal_transformers(shipped, hf_model, k):
    """The K finished beams, best first, and their scores equal transformers' generate(num_beams=K,
    num_return_sequences=K, early_stopping=True) for several prompts and length penalties (paged, chunked prefill)."""
    model, tokenizer = shipped
    for text in PROMPTS:
        for lp in (1.0, 3.0):
            ids = recall(tokenizer, text)
            theirs, their_scores = hf_beams(hf_model, ids, k, lp)
            result = search(model, tokenizer, ids, k, lp)
            assert [b.token_ids for b in result.beams] == theirs, (text, k, lp)
            ours = torch.tensor([b.score for b in result.beams])
            assert torch.allclose(ours, their_scores, rtol=1e-4, atol=1e-6 * their_scores.abs().max().item()), (
                text, k, lp)


def test_length_penalty_changes_transformers_beams(hf_model, shipped):
    """The parity cases exercise the length penalty: on one of them transformers ranks the beams differently."""
    ids = recall(shipped[1], "no")
    assert hf_beams(hf_model, ids, 4, 1.0)[0] != hf_beams(hf_model, ids, 4, -1.0)[0]


def test_paged_equals_contiguous_twin_with_prefix_caching(shipped):
    """Paged (prefix caching on, the prompt searched twice so the second run hits) == the contiguous twin."""
    model, tokenizer = shipped
    ids = recall(tokenizer, "hello world")
    twin = search(model, tokenizer, ids, 4, layout="contiguous")
    engine = BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=64, enable_prefix_caching=True))
    for run in range(2):
        paged = engine.run(ids, BeamParams(beam_width=4, max_tokens=MAX_TOKENS))
        assert [b.token_ids for b in paged.beams] == [b.token_ids for b in twin.beams]
        assert torch.allclose(torch.tensor([b.score for b in paged.beams]), torch.tensor([b.score for b in twin.beams]),
                              rtol=1e-5)
    prefill = paged.traces[0]
    assert len(ids) == 13 and len(prefill.seqs[0].tokens_in) == 1  # the 3 full blocks were hits: 1 token fed
    assert len(prefill.blocks_allocated[prefill.seqs[0].seq_id]) == 1  # and 1 fresh block taken


def test_tree_forks_copies_and_frees(shipped):
    """Each step's trace tells the truth about the pool: forks share every block of the parent, a copy-on-write
    gives the writer a private last block, pruned beams free blocks at once, and the end frees everything."""
    model, tokenizer = shipped
    result = search(model, tokenizer, recall(tokenizer, "hello world"), 4, num_blocks=40)
    traces = result.traces
    assert sum(len(t.forked) for t in traces) > 0 and sum(len(t.copies) for t in traces) > 0
    assert sum(len(t.pruned) for t in traces) > 0
    for before, t in zip(traces, traces[1:]):
        for parent, children in before.forked.items():
            for child in children:  # a child starts as its parent's table
                assert before.block_tables_after[child] == before.block_tables_after[parent]
        for src, dst in t.copies:  # the copy's source was shared, its destination is the writer's alone
            assert sum(src in tbl for tbl in before.block_tables_after.values()) > 1
            assert sum(dst in tbl for tbl in t.tables_read.values()) == 1
        held = {b for tbl in t.block_tables_after.values() for b in tbl}
        assert t.num_free_blocks == 40 - len(held)  # blocks of pruned beams are free right away
        for seq_id in t.pruned:
            assert seq_id not in t.block_tables_after
    assert traces[-1].num_free_blocks == 40 and not traces[-1].block_tables_after
    shared, unshared = result.memory()
    assert 0 < shared < unshared  # sharing saves blocks


@pytest.mark.parametrize("layout", ["paged", "contiguous"])
def test_groups_preempted_whole_and_resumed_give_the_same_beams(shipped, hf_model, layout):
    """Three prompts searched together in a pool that holds one group alone: groups are preempted as a whole
    (every beam's blocks freed at once), resumed by recompute (the prompt prefilled again, the K beams forked
    again), and every prompt's beams still equal transformers' and its own search without pressure."""
    model, tokenizer = shipped
    prompts = [recall(tokenizer, p) for p in ("hello world", "abc 123", "PagedAttention")]
    engine = BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=24, watermark=0.0),
                        SchedulerConfig(max_num_batched_tokens=8, enable_chunked_prefill=True), kv_layout=layout)
    results = engine.run_all(prompts, BeamParams(beam_width=4, max_tokens=MAX_TOKENS))
    assert sum(r.preemptions for r in results) > 0
    for ids, result in zip(prompts, results):
        theirs, their_scores = hf_beams(hf_model, ids, 4, 1.0)
        alone = search(model, tokenizer, ids, 4, layout=layout)
        assert [b.token_ids for b in result.beams] == theirs == [b.token_ids for b in alone.beams]
        assert torch.allclose(torch.tensor([b.score for b in result.beams]), their_scores, rtol=1e-4)
        for i, t in enumerate(result.traces):
            if t.phase != "preempt":
                continue
            beams = len(t.block_tables_before)  # the whole group at once: every beam, every block it held
            assert set(t.preempted) == set(t.blocks_freed) == set(t.block_tables_before)
            assert {b for blocks in t.blocks_freed.values() for b in blocks} == {
                b for table in t.block_tables_before.values() for b in table}
            later = result.traces[i + 1:]
            assert later[0].phase == "prefill"  # resumed by recompute: the prompt first
            if beams > 1:  # then forked into the same number of beams again, and their tokens fed again
                refork = next(u for u in later if u.forked)
                assert len(next(iter(refork.forked.values()))) == beams - 1
                assert any(u.reason.startswith("recompute") and all(len(x.tokens_in) > 1 for x in u.seqs)
                           for u in later)
    assert engine.block_manager.num_free_blocks == 24


def test_skip_cow_corrupts_beams(shipped):
    """The break-it: without copy-on-write two beams write into one shared block, and the beams no longer match
    the contiguous twin."""
    model, tokenizer = shipped
    ids = recall(tokenizer, "hello world")
    twin = search(model, tokenizer, ids, 4, layout="contiguous")
    broken = search(model, tokenizer, ids, 4, skip_cow=True)
    assert sum(len(t.cow_skipped) for t in broken.traces) > 0 and not any(t.copies for t in broken.traces)
    assert ([b.token_ids for b in broken.beams] != [b.token_ids for b in twin.beams]
            or not torch.allclose(torch.tensor([b.score for b in broken.beams]),
                                  torch.tensor([b.score for b in twin.beams]), rtol=1e-4))


def test_refusals_are_clear(shipped):
    """A pool that cannot hold K unshared beams, K above max_num_seqs, a width of 1 and skip_cow on the twin are
    refused with a ValueError naming the value."""
    model, tokenizer = shipped
    ids = recall(tokenizer, "hi")
    with pytest.raises(ValueError, match="preempted only as a whole"):
        search(model, tokenizer, ids, 4, num_blocks=8)
    with pytest.raises(ValueError, match="max_num_seqs"):
        BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=64),
                   SchedulerConfig(max_num_seqs=2)).run(ids, BeamParams(beam_width=3))
    with pytest.raises(ValueError, match="beam_width"):
        BeamParams(beam_width=1)
    with pytest.raises(ValueError, match="skip_cow"):
        BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=8), kv_layout="contiguous", skip_cow=True)


def test_the_latest_admitted_group_is_the_one_preempted(shipped):
    """Under memory pressure the victim is the running group admitted last (vLLM v0's
    running.pop()), every time: replayed from the traces, each "preempt" names the group whose
    current run began latest among the groups running at that step."""
    model, tokenizer = shipped
    prompts = [recall(tokenizer, p) for p in ("hello world", "abc 123", "PagedAttention", "xy")]
    engine = BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=24, watermark=0.0),
                        SchedulerConfig(max_num_batched_tokens=8, enable_chunked_prefill=True))
    results = engine.run_all(prompts, BeamParams(beam_width=4, max_tokens=MAX_TOKENS))
    events = sorted((t.step, g, t.phase) for g, r in enumerate(results) for t in r.traces)
    last_step = {g: max(t.step for t in r.traces) for g, r in enumerate(results)}
    running: list[int] = []  # groups in the order their current run began
    victims = []
    for step, group, phase in events:
        if phase == "preempt":
            assert running and running[-1] == group, (step, group, running)
            victims.append(group)
            running.remove(group)
            continue
        if group not in running:
            running.append(group)
        if step == last_step[group]:
            running.remove(group)
    assert len(victims) >= 2 and len(set(victims)) >= 2, victims  # several victims, several groups


def test_a_scheduler_config_it_cannot_honour_is_refused(shipped):
    """preemption_mode="swap" or speculative="ngram:2" in the SchedulerConfig is refused by name at
    construction instead of silently searching with recompute and no speculation."""
    model, tokenizer = shipped
    for sched, name in ((SchedulerConfig(preemption_mode="swap", swap_space=8), "preemption_mode"),
                        (SchedulerConfig(speculative="ngram:2"), "speculative")):
        with pytest.raises(ValueError, match=name):
            BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=16), sched)
