"""Break it where it is taught: no causal mask and context_len off by one (page 2, lessons.gather_breaks), a token
written one slot too far (page 3, the "w<id>" op of lessons.batch). Each broken result is compared with an
independent float64 reference built from the contiguous cache, never with the code under test."""

from __future__ import annotations

import random

import pytest
import torch

from lessons.batch import OP_PATTERN, BatchConfig, BatchLesson
from lessons.gather import GatherConfig, GatherLesson
from lessons.gather_breaks import OFFSETS, context_len_off, without_causal_mask
from paged.addressing import locate
from ui.breaks import misplaced_lines
from ui.page import PageContext
from ui.strings import translator

from helpers import naive_decode


def naive_rows(query, keys, values, visible_to):
    """Float64 attention, query row i seeing keys 0 … visible_to[i] (inclusive): [rows, num_heads, head_dim]."""
    return torch.stack([naive_decode(q, keys[:v + 1], values[:v + 1]) for q, v in zip(query, visible_to)])


@pytest.mark.parametrize("context_len,q_len,block_size", [(10, 10, 4), (9, 4, 2), (5, 1, 4)])
def test_no_mask_changes_every_prefill_row_but_the_last(context_len, q_len, block_size):
    """Without the mask, row i of a prefill equals attention over the whole context (checked against a float64
    loop); the rows that had future tokens hidden change, the last row does not."""
    scene = GatherLesson(GatherConfig(context_len=context_len, q_len=q_len, block_size=block_size, mode="prefill",
                                     seed=3))
    br = without_causal_mask(scene)
    keys, values = scene.contiguous.get(0)
    everything = naive_rows(scene.query, keys, values, [context_len - 1] * q_len)
    masked = naive_rows(scene.query, keys, values, list(range(context_len - q_len, context_len)))
    torch.testing.assert_close(br.diff, everything - masked, rtol=0, atol=1e-5 * max(1.0, masked.abs().max()))
    assert br.positions == list(range(context_len - q_len, context_len))
    assert br.changed == [True] * (q_len - 1) + [False]
    assert br.row_diff[-1] < 1e-5 * max(1.0, masked.abs().max().item())


def test_no_mask_changes_nothing_in_decode():
    """The one decode query is the last position: the mask hides nothing from it."""
    scene = GatherLesson(GatherConfig(context_len=13, block_size=4, seed=1))
    br = without_causal_mask(scene)
    assert br.positions == [12] and br.changed == [False] and br.changed_rows == 0


@pytest.mark.parametrize("context_len,block_size", [(10, 4), (12, 4), (7, 1), (1, 4)])
def test_context_len_off_by_one(context_len, block_size):
    """−1 equals attention over all but the newest token; +1 equals attention over the history plus the K/V held
    in the slot the chain gives for token context_len (zeros when never written, inside the last block; past the
    table's end the re-read last block's first token). Both differ from the exact reference; 0 matches it."""
    scene = GatherLesson(GatherConfig(context_len=context_len, block_size=block_size, seed=7))
    keys, values = (x.double() for x in scene.contiguous.get(0))
    exact = naive_decode(scene.query, keys, values)
    scale = 1e-5 * max(1.0, exact.abs().max().item())
    assert context_len_off(scene, 0).ok and context_len_off(scene, 0).max_abs_err < scale
    minus = context_len_off(scene, -1)
    if context_len == 1:
        assert not minus.possible and minus.diff is None
    else:
        assert minus.dropped_token == context_len - 1 and not minus.ok
        torch.testing.assert_close(minus.diff, naive_decode(scene.query, keys[:-1], values[:-1]) - exact,
                                   rtol=0, atol=scale)
    plus = context_len_off(scene, 1)
    table = scene.block_table
    past = context_len // block_size >= len(table)
    assert plus.past_table == past
    if past:  # the last block's first token is read a second time
        j = (len(table) - 1) * block_size
        extra_k, extra_v = keys[j:j + 1], values[j:j + 1]
        assert plus.holds_token == j and plus.slot_read == table[-1] * block_size
    else:  # a slot of the last block no token was written to
        extra_k, extra_v = torch.zeros_like(keys[:1]), torch.zeros_like(values[:1])
        assert plus.holds_token is None
        assert plus.slot_read == table[context_len // block_size] * block_size + context_len % block_size
    want = naive_decode(scene.query, torch.cat([keys, extra_k]), torch.cat([values, extra_v])) - exact
    torch.testing.assert_close(plus.diff, want, rtol=0, atol=scale)
    assert not plus.ok


def test_context_len_off_refuses_what_it_cannot_show():
    with pytest.raises(ValueError, match="delta must be one of"):
        context_len_off(GatherLesson(GatherConfig()), 2)
    with pytest.raises(ValueError, match="decode mistake"):
        context_len_off(GatherLesson(GatherConfig(mode="prefill")), 1)
    assert OFFSETS == (0, -1, 1)


def owner_of(demo: BatchLesson, slot: int):
    """(seq_id, token index) whose block holds `slot`, from the running tables; (None, None) for a free block."""
    bs = demo.config.block_size
    for sid, table in demo.tables().items():
        if slot // bs in table:
            return sid, table.index(slot // bs) * bs + slot % bs
    return None, None


@pytest.mark.parametrize("seed", range(12))
def test_wrong_slot_names_its_victim_and_the_check_fails(seed):
    """After a "w<id>" step: the stray K/V went to slot + 1 of the token's real slot (the address chain's), the
    victim is the sequence whose block holds that slot; the writer's own check fails, and another victim's check
    fails exactly when a token it had already written was overwritten."""
    rng = random.Random(seed)
    demo = BatchLesson(BatchConfig(num_blocks=16, seed=seed))
    assert all(c.ok for c in demo.checks)
    seen = set()
    for i in range(12):
        running = [s.seq_id for s in demo.playground.running()]
        if not running:
            break
        op = f"w{rng.choice(running)}" if i % 3 == 2 else rng.choice(
            ["d", "d", f"a{rng.randint(1, 9)}"] + ([f"f{rng.choice(running)}"] if len(running) > 2 else []))
        event = demo.apply(op)
        if op[0] != "w" or not event.ok:
            continue
        m, bs = event.misplaced, demo.config.block_size
        table = demo.tables()[m.seq_id]
        assert m.slot == locate(m.token_index, table, bs).slot
        assert m.written == (m.slot + 1 if m.slot + 1 < demo.config.num_blocks * bs else -1)
        assert (m.victim, m.victim_token) == (owner_of(demo, m.written) if m.written >= 0 else (None, None))
        ok = {c.seq_id: c.ok for c in demo.checks}
        assert not ok[m.seq_id]
        if m.victim is not None and m.victim != m.seq_id:
            assert ok[m.victim] == (not m.overwrote)
        seen.add("self" if m.victim == m.seq_id else "other" if m.victim is not None else "free")
        for lang in ("en", "zh"):  # every case has its words, in both languages, with its numbers
            text = "\n".join(misplaced_lines(PageContext("batch", lang, translator("batch", lang)), m,
                                              [c.seq_id for c in demo.checks if not c.ok]))
            assert str(m.slot) in text and (m.written < 0 or str(m.written) in text)
        demo = BatchLesson.replay(demo.config, [o for o in demo.ops if o[0] != "w"])[0]  # heal: replay without it
    assert seen


def test_wrong_slot_op_round_trips_and_is_refused_for_a_stopped_sequence():
    """"w<id>" is a well-formed op (the URL keeps it); on a sequence that is not running it changes nothing."""
    assert OP_PATTERN.match("w2") and not OP_PATTERN.match("w")
    assert not any(OP_PATTERN.match(op) for op in ("w٢", "a٣", "f²", "a３"))  # ASCII digits only
    demo = BatchLesson(BatchConfig())
    event = demo.apply("w9")
    assert not event.ok and event.reason == "not_running" and demo.ops == []
    demo.apply("w0")
    again, applied = BatchLesson.replay(demo.config, demo.ops)
    assert applied == 1 and again.last_event.misplaced == demo.last_event.misplaced
    assert [c.ok for c in again.checks] == [c.ok for c in demo.checks]


def test_a_write_past_the_pool_is_dropped_and_said_so():
    """The pool's very last slot + 1 is outside the cache: the stray write is dropped (slot -1), the writer's own
    token is missing, and the page says a GPU would have written out of bounds."""
    demo = BatchLesson(BatchConfig(num_blocks=4, block_size=2, seed=0))
    for op in ("f0", "f1", "f2", "a1"):
        demo.apply(op)
    table = demo.tables()
    (sid, blocks), = table.items()
    demo.playground.sequences[sid].block_table[-1] = 3  # its one block is the pool's last: token 1 -> slot 7
    del demo.playground.manager.free_block_ids[3]
    demo.playground.manager.free_block_ids.put_back([blocks[-1]])
    demo.playground.manager.ref_counts[3], demo.playground.manager.ref_counts[blocks[-1]] = 1, 0
    demo.playground.manager.tables[sid] = demo.playground.sequences[sid].block_table
    event = demo.apply(f"w{sid}")
    m = event.misplaced
    assert (m.slot, m.written, m.victim) == (7, -1, None)
    ctx = PageContext("batch", "en", translator("batch", "en"))
    assert any("outside the cache" in line for line in misplaced_lines(ctx, m, [sid]))
