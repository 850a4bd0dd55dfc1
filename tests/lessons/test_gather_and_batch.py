"""The teaching pages' state without the UI: the gather scene (seeded, paged == contiguous) and the batch-decode
demo (operations replay exactly, blocks come from the free list only when the last one is full, a full pool is
refused without change)."""

from __future__ import annotations

import json

import pytest
import torch

from paged.attention import attention
from lessons.batch import BatchConfig, BatchLesson
from lessons.gather import GatherConfig, GatherLesson


def test_gather_scene_steps_through_the_chain():
    """After k reads the loop holds exactly the first k tokens, read from the slots of the address chain."""
    scene = GatherLesson(GatherConfig(context_len=10, block_size=4), device="cpu")
    assert len(scene.block_table) == 3 and len(set(scene.block_table)) == 3
    assert scene.read_slots(0) == [] and len(scene.read_slots(4)) == 4
    keys, values = scene.gathered(6)
    ref_k, ref_v = scene.contiguous.get(0)
    assert torch.equal(keys, ref_k[:6]) and torch.equal(values, ref_v[:6])
    assert scene.read_slots(10) == [a.slot for a in scene.addresses]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_gather_scene_matches_contiguous(dtype, mode):
    """Gather-then-attend equals attention over the contiguous twin, within the dtype's tolerance."""
    cfg = GatherConfig(num_heads=4, num_kv_heads=2, head_dim=8, context_len=13, block_size=4, dtype=dtype,
                       mode=mode, q_len=5)
    result = GatherLesson(cfg, device="cpu").result()
    assert result.ok and result.bitwise_equal, (result.rel_err, result.tolerance)
    rows = result.weights if mode == "decode" else result.weights.reshape(-1, 13)
    assert torch.allclose(rows.sum(-1), torch.ones(rows.shape[0]), atol=1e-5)


def test_drawn_mask_rows_are_the_last_queries():
    """The page draws the mask's last rows: prompt of 4 queries over 7 tokens, 2 rows drawn are tokens 5 and 6,
    which see keys 0..5 and 0..6; drawn weights are zero exactly where that mask is False."""
    scene = GatherLesson(GatherConfig(context_len=7, block_size=2, mode="prefill", q_len=4), device="cpu")
    assert scene.mask_rows(2) == [[True] * 6 + [False], [True] * 7]
    weights = scene.result().weights  # [num_heads, q_len, context_len]
    full = scene.mask_rows(4)
    for i, row in enumerate(full):
        assert [bool(w) for w in (weights[:, i] != 0).any(0).tolist()] == row


@pytest.mark.parametrize("rows", [5, -1, 2.0])
def test_mask_rows_refuses_rows_the_prompt_has_not(rows):
    """More rows than queries (or a negative or float count) is an error, not a shorter mask drawn as if whole."""
    scene = GatherLesson(GatherConfig(context_len=7, block_size=2, mode="prefill", q_len=4), device="cpu")
    with pytest.raises(ValueError, match="rows must be"):
        scene.mask_rows(rows)


def test_prefill_weights_respect_the_mask():
    """q_len 3 over 6 tokens: query i gives exactly zero weight to keys after 3 + i."""
    scene = GatherLesson(GatherConfig(context_len=6, block_size=2, mode="prefill", q_len=3), device="cpu")
    w = scene.result().weights  # [num_heads, 3, 6]
    for i in range(3):
        assert torch.all(w[:, i, 4 + i:] == 0) and torch.all(w[:, i, :4 + i] > 0)
    assert 0 < scene.result().future_weight < 1
    keys, values = scene.contiguous.get(0)
    assert torch.allclose(scene.result().paged, attention(scene.query, keys, values, causal=True))


@pytest.mark.parametrize("mode", ["decode", "prefill"])
def test_drawn_weights_are_the_ones_attention_uses(mode):
    """The weights the page draws, applied to the contiguous values by hand (GQA: head h reads kv head h // 3),
    give the float64 reference output."""
    cfg = GatherConfig(num_heads=6, num_kv_heads=2, context_len=11, block_size=4, mode=mode, q_len=4)
    scene = GatherLesson(cfg, device="cpu")
    result = scene.result()
    w = result.weights.double() if mode == "prefill" else result.weights.double()[:, None]  # [H, q_len, C]
    _, values = scene.contiguous.get(0)
    v = values.double().repeat_interleave(3, dim=1)  # [C, H, D]
    out = torch.einsum("hqk,khd->qhd", w, v)
    expected = result.reference if mode == "prefill" else result.reference[None]
    assert torch.allclose(out, expected, rtol=0, atol=1e-5 * expected.abs().max().item())


def test_gather_scene_is_seeded_and_validates():
    a, b = GatherLesson(GatherConfig(seed=3), "cpu"), GatherLesson(GatherConfig(seed=3), "cpu")
    assert a.block_table == b.block_table and torch.equal(a.query, b.query)
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        GatherConfig(num_heads=4, num_kv_heads=3).validate()
    with pytest.raises(ValueError, match="needs 512 blocks"):
        GatherConfig(context_len=512, block_size=1).validate()
    exported = json.loads(json.dumps(a.trace(10)))  # the export is JSON as it stands
    reads = exported["reads"]
    assert [r["token_index"] for r in reads] == list(range(10)) and exported["check"]["ok"]
    for r in reads:  # every read follows the address chain, recomputed here by hand
        physical = a.block_table[r["token_index"] // 4]
        assert (r["physical_block_id"], r["block_offset"]) == (physical, r["token_index"] % 4)
        assert r["slot"] == physical * 4 + r["token_index"] % 4
    assert "check" not in a.trace(3) and len(a.trace(3)["reads"]) == 3  # the check only once the gather is done


def test_batch_demo_starts_with_the_seed_batch():
    demo = BatchLesson(BatchConfig(), device="cpu")
    assert demo.tables() == {0: [7, 2, 9], 1: [4, 1], 2: [8, 5, 3, 6]}
    assert demo.cached_token_counts() == {0: 10, 1: 6, 2: 15} and all(c.ok for c in demo.checks)


def test_new_block_only_when_last_is_full():
    """Step 1 fits every sequence in its last block; step 2 fills C's (16 tokens) so C takes one block."""
    demo = BatchLesson(BatchConfig(), device="cpu")
    first = demo.apply("d")
    assert first.ok and first.new_blocks == {} and first.written == {0: 38, 1: 6, 2: 27}
    second = demo.apply("d")
    assert list(second.new_blocks) == [2] and second.new_blocks[2][0] not in (7, 2, 9, 4, 1, 8, 5, 3, 6)
    assert all(c.ok for c in demo.checks)


def test_full_pool_is_refused_without_change():
    demo, applied = BatchLesson.replay(BatchConfig(), ["d"] * 5, device="cpu")
    assert applied == 5
    before = demo.trace()
    event = demo.apply("d")
    assert not event.ok and event.reason == "pool_full" and event.counts["free"] == 0
    assert demo.trace()["sequences"] == before["sequences"] and demo.ops == ["d"] * 5


def test_finish_and_add_go_through_the_free_list():
    demo = BatchLesson(BatchConfig(), device="cpu")
    freed = demo.apply("f1").freed
    assert sorted(freed) == [1, 4] and set(freed) <= set(demo.playground.manager.free_block_ids)
    added = demo.apply("a5")
    assert added.ok and len(added.new_blocks[3]) == 2
    assert not demo.apply("f1").ok  # B is no longer running
    assert not demo.apply("zz").ok and demo.ops == ["f1", "a5"]


def test_replay_reproduces_the_state_exactly():
    """The same log gives the same tables, the same cache bits and the same checks (a shared link works)."""
    ops = ["d", "d", "f1", "a5", "d", "d"]
    live = BatchLesson(BatchConfig(dtype="float16"), device="cpu")
    for op in ops:
        live.apply(op)
    again, applied = BatchLesson.replay(BatchConfig(dtype="float16"), ops, device="cpu")
    assert applied == len(ops)
    assert json.dumps(again.trace()) == json.dumps(live.trace())
    assert torch.equal(again.playground.pool.key_cache, live.playground.pool.key_cache)


def test_config_that_does_not_fit_the_seed_tables_uses_the_free_list():
    demo = BatchLesson(BatchConfig(block_size=2, num_blocks=32), device="cpu")
    assert not demo.used_seed_tables and demo.cached_token_counts() == {0: 10, 1: 6, 2: 15}
    small = BatchLesson(BatchConfig(block_size=1, num_blocks=12), device="cpu")
    assert not small.last_event.ok and small.last_event.reason == "pool_full"
