"""The swap policy's rules (paged/engine/swapping.py) one by one on a Scheduler driven by hand, blocks of 4, with
every number counted in the docstrings: when a swapped sequence comes back (seats, token budget, free blocks, the
watermark, the block its next token opens), what each step's why says, the bytes `apply` copies and the swap-pool
counts it reports, a victim's status and swap count, a stuck queue, the break-it's routes and the refusals."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

from paged.block_manager import BlockManager
from paged.config import CacheConfig, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.scheduler import Scheduler
from paged.engine.swapping import attach_swapper, misroute
from paged.engine.windowing import with_window
from paged.kv_cache import KVCachePool
from paged.sequence import Sequence, SequenceStatus

from helpers import running_seq, tiny_model

pytestmark = pytest.mark.engine

BS = 4
# The fake runner's pool: 2 layers, 2 KV heads, head_dim 8, float32: one block is K + V = 2 x 2 x 4 x 2 x 8 x 4 bytes.
BLOCK_BYTES = 2 * 2 * BS * 2 * 8 * 4  # 1024


def scheduler(num_blocks, max_num_seqs=8, budget=64, swap_space=16, watermark=0.0) -> Scheduler:
    bm = BlockManager(num_blocks, BS, watermark=watermark)
    return Scheduler(SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=max_num_seqs,
                                     preemption_mode="swap", swap_space=swap_space), bm)


def decoding(sched: Scheduler, seq_id: int, prompt_len: int) -> Sequence:
    """A running sequence just past its prefill: its prompt cached in blocks_needed(prompt_len) blocks, one
    generated token (index prompt_len) not yet cached; its next token opens a block iff prompt_len % 4 == 0."""
    seq = running_seq(sched.block_manager, seq_id, prompt_len)
    seq.generated_token_ids.append(9)
    seq.status = SequenceStatus.RUNNING
    sched.running.append(seq)
    return seq


def swapped_out(sched: Scheduler, seq: Sequence) -> Sequence:
    assert sched.swapper.preempt(seq) is not None
    return seq


def hold(sched: Scheduler, num_blocks: int) -> None:
    """Take num_blocks blocks of the pool for a sequence the scheduler does not know (a filler)."""
    sched.block_manager.allocate(Sequence(99, list(range(1, num_blocks * BS + 1))))


@pytest.mark.parametrize("max_num_seqs, back", [(2, True), (1, False)])
def test_a_swapped_sequence_comes_back_only_within_max_num_seqs(max_num_seqs, back):
    """One running sequence and one swapped: taking it back makes 2 running, allowed for max_num_seqs 2 (it runs
    this very step, RUNNING again), refused for 1 (it waits, WAITING, in the swapped queue)."""
    s = scheduler(32, max_num_seqs=max_num_seqs)
    r = decoding(s, 0, 5)
    a = swapped_out(s, decoding(s, 1, 5))
    assert a.status is SequenceStatus.WAITING
    out = s.schedule()
    assert out.seqs == ([r, a] if back else [r])
    assert (a.status, list(s.swapper.swapped)) == ((SequenceStatus.RUNNING, []) if back else
                                                    (SequenceStatus.WAITING, [a]))


@pytest.mark.parametrize("num_running, back", [(1, True), (2, False)])
def test_a_swapped_sequence_comes_back_only_within_the_token_budget(num_running, back):
    """Budget 2, max_num_seqs 8: each running sequence decodes one token, so a swapped one comes back beside one
    running sequence (2 tokens) but not beside two (3 tokens > 2), however many seats are left."""
    s = scheduler(32, max_num_seqs=8, budget=2)
    running = [decoding(s, i, 5) for i in range(num_running)]
    a = swapped_out(s, decoding(s, 7, 5))
    assert s.schedule().seqs == running + ([a] if back else [])


@pytest.mark.parametrize("runs, prompt, held, back", [
    # running r (prompt 4: 1 block, its next token opens a 2nd: needs 1); a: prompt 5, 2 blocks, next token fits
    # (grow 0); watermark 1 block (0.1 x 10), kept while anything runs. free = 10 - 1 - held.
    (True, 5, 5, True),    # free 4 = needs 1 + k 2 + grow 0 + watermark 1: exactly enough
    (True, 5, 6, False),   # free 3: one short
    # nothing runs: no watermark kept (the pool may be used up to its last block). free = 10 - held.
    (False, 5, 8, True),   # free 2 = k 2 + grow 0
    (False, 8, 7, True),   # prompt 8: 2 blocks full, its next token opens a 3rd (grow 1): free 3 = 2 + 1
    (False, 8, 8, False),  # free 2: its next token's block is missing (and as nothing runs, the queue is stuck)
])
def test_a_swapped_sequence_comes_back_when_its_blocks_and_next_block_fit(runs, prompt, held, back):
    """The swap-in's block rule at its boundary: the free blocks must cover every running sequence's next block,
    the swapped sequence's blocks, the block its own next token opens, and the watermark while anything runs."""
    s = scheduler(10, watermark=0.1)
    assert s.block_manager.watermark_blocks == 1
    running = [decoding(s, 0, 4)] if runs else []
    a = swapped_out(s, decoding(s, 1, prompt))
    hold(s, held)
    if not (runs or back):
        with pytest.raises(RuntimeError, match="cannot swap in"):
            s.schedule()
    else:
        assert s.schedule().seqs == running + ([a] if back else [])
    assert s.swapper.holds(a) is not back


def test_the_second_swapped_sequence_counts_the_first_ones_next_block():
    """r runs and needs a block (prompt 4); a (prompt 8: 2 blocks + 1 for its next token) and b (prompt 5: 2
    blocks) are swapped, a first in line; 5 free blocks. a: 5 - 1 - 2 - 1 = 1 >= 0, back (3 free left, 2 of them
    owed to r's and a's next tokens); b: 3 - 2 - 2 = -1 < 0, it waits."""
    s = scheduler(10)
    r = decoding(s, 0, 4)
    a, b = decoding(s, 1, 8), decoding(s, 2, 5)
    swapped_out(s, b), swapped_out(s, a)  # the newest victim goes to the head: a comes back first
    hold(s, 4)
    assert s.block_manager.num_free_blocks == 5
    out = s.schedule()
    assert out.seqs == [r, a] and list(s.swapper.swapped) == [b]
    assert list(s.swapper.into) == [1] and out.preempted == []  # b was not taken in (to be swapped out again)


def test_a_swapped_sequence_that_can_never_come_back_is_named():
    """Nothing runs, and the head of the swapped queue (b: prompt 4, 1 block + 1 for its next token) finds 1 free
    block: no step can make progress, so schedule raises naming b (not a, behind it)."""
    s = scheduler(4)
    a, b = decoding(s, 0, 12), decoding(s, 1, 4)
    swapped_out(s, a), swapped_out(s, b)
    hold(s, 3)
    with pytest.raises(RuntimeError, match=r"^scheduler stuck: seq 1 cannot swap in$"):
        s.schedule()


def fake_runner(num_blocks: int) -> SimpleNamespace:
    """What `apply` reads of a ModelRunner: its paged pool, every value distinct, and the contiguous caches."""
    pool = KVCachePool(2, num_blocks, BS, 2, 8, torch.float32, "cpu")
    pool.key_cache.copy_(torch.arange(pool.key_cache.numel(), dtype=torch.float32).view_as(pool.key_cache))
    pool.value_cache.copy_(-pool.key_cache)
    return SimpleNamespace(pool=pool, contiguous={})


def block_kv(pool: KVCachePool, block: int) -> torch.Tensor:
    return torch.stack([pool.key_cache[:, block], pool.value_cache[:, block]])


@pytest.mark.parametrize("break_it", [None, "no_copy"])
def test_swap_out_then_in_why_bytes_and_pool_counts(break_it):
    """A 3-block pool, three sequences of prompt 4 (1 block each, each next token opens a block): free 0, need 3.
    Step 1 swaps out the newest (seq 2: free 1, need 2), then seq 1 (free 2, need 1): seq 0 takes a block. Swap
    blocks 0 and 1 (the swap pool's head) get them: 2 x 1024 bytes. Step 2 (seq 0 finished: 3 free): seq 1, first
    in line, comes back (1 block + 1 for its next token, nothing else runs), seq 2 does not (2 free - 1 owed - 1 -
    1 < 0); swap block 1 goes back: 1024 bytes more, none with the "no_copy" break-it, whose block keeps what the
    pool held (zeros here) instead of seq 1's K/V."""
    s = scheduler(3)
    runner = fake_runner(3)
    assert attach_swapper(s, runner) is s.swapper and s.swapper.pool.key_cache.device.type == "cpu"
    seqs = [decoding(s, i, 4) for i in range(3)]
    blocks = [seq.block_table[0] for seq in seqs]
    kv = [block_kv(runner.pool, b).clone() for b in blocks]

    out = s.schedule()
    assert out.why == [("decode", {"count": 1}), ("new_blocks", {"count": 1}),
                       ("swapped_out", {"seqs": [2, 1], "blocks": 2})]
    assert out.preempted == [2, 1] and out.seqs == [seqs[0]]
    fields = s.swapper.apply(runner)
    assert fields == dict(swap_out={2: [(blocks[2], 0)], 1: [(blocks[1], 1)]}, swap_in={}, swapped=[1, 2],
                          num_free_swap_blocks=14, num_swap_blocks=16)
    assert s.swapper.bytes_copied == 2 * BLOCK_BYTES
    assert torch.equal(block_kv(s.swapper.pool, 0), kv[2]) and torch.equal(block_kv(s.swapper.pool, 1), kv[1])

    s.running.remove(seqs[0])
    s.block_manager.free(seqs[0])
    runner.pool.key_cache.zero_(), runner.pool.value_cache.zero_()  # the released blocks may be reused: forget them
    s.swapper.break_it = break_it
    out = s.schedule()
    assert out.why == [("swapped_in", {"seqs": [1], "blocks": 1}), ("decode", {"count": 1}),
                       ("new_blocks", {"count": 1})]
    assert out.seqs == [seqs[1]] and seqs[1].status is SequenceStatus.RUNNING
    fields = s.swapper.apply(runner)
    new = seqs[1].block_table[0]
    assert fields == dict(swap_out={}, swap_in={1: [(1, new)]}, swapped=[2], num_free_swap_blocks=15,
                          num_swap_blocks=16)
    assert s.swapper.bytes_copied == (3 if break_it is None else 2) * BLOCK_BYTES
    assert torch.equal(block_kv(runner.pool, new), kv[1]) is (break_it is None)


def test_a_full_swap_pool_recomputes_and_the_why_says_so():
    """As above with a 1-block swap pool: seq 2 is swapped out (the pool is then full), seq 1 needs 1 swap block,
    0 free: it is recomputed (back to the waiting queue). The why tells each, and that a swapped sequence now
    holds back the waiting one."""
    s = scheduler(3, swap_space=1)
    seqs = [decoding(s, i, 4) for i in range(3)]
    out = s.schedule()
    assert out.why == [("decode", {"count": 1}), ("new_blocks", {"count": 1}),
                       ("swapped_out", {"seqs": [2], "blocks": 1}), ("preempted", {"seqs": [1]}),
                       ("swap_full", {"seq": 1, "need": 1, "free": 0, "swap_space": 1}),
                       ("swap_wait", {"count": 1})]
    assert list(s.waiting) == [seqs[1]] and list(s.swapper.swapped) == [seqs[2]]


def test_a_waiting_prompt_without_swapped_sequences_is_no_swap_wait():
    """Nothing swapped, a prompt that does not fit waits beside a decode: the why is the plain scheduler's."""
    s = scheduler(3)
    decoding(s, 0, 5)
    s.add(Sequence(1, list(range(1, 10))))  # 9 tokens: 3 blocks, 1 free
    out = s.schedule()
    assert out.phase == "decode" and [code for code, _ in out.why] == ["decode"]


def test_swap_count_status_and_drop():
    """A sequence swapped out twice counts 2 swaps (WAITING each time, RUNNING in between); dropped while
    swapped (an abort), it leaves the queue, the swap pool and the contiguous twin's store."""
    s = scheduler(8)
    a = decoding(s, 0, 5)
    swapped_out(s, a)
    assert (a.status, s.swapper.num_swaps) == (SequenceStatus.WAITING, {0: 1})
    s.schedule()
    assert a.status is SequenceStatus.RUNNING
    swapped_out(s, a)
    assert (a.status, s.swapper.num_swaps) == (SequenceStatus.WAITING, {0: 2})
    s.swapper.store[0] = "its ContiguousKVCache"
    s.swapper.drop(a)
    assert (s.swapper.store, list(s.swapper.swapped)) == ({}, [])
    assert s.swapper.space.num_free_blocks == 16 and not s.swapper.holds(a)


def test_misroute_routes():
    """The swap-in copies of the break-it: None the given pairs, "no_copy" none, "wrong_blocks" each swap block
    into the pool block of the next logical block (the last into the first's); anything else named."""
    pairs = [(0, 10), (1, 11), (2, 12)]
    assert misroute(pairs, None) == pairs and misroute(pairs, "no_copy") == []
    assert misroute(pairs, "wrong_blocks") == [(0, 11), (1, 12), (2, 10)]
    with pytest.raises(ValueError, match="^" + re.escape(
            "break_it must be None or one of ('no_copy', 'wrong_blocks'), got 'swap'") + "$"):
        misroute(pairs, "swap")


def test_swap_with_a_sliding_window_is_refused_in_full():
    """Swap preemption with a sliding-window model is refused, the whole message as written; recompute is not."""
    model, tok = tiny_model(hidden_size=32, num_hidden_layers=1)
    cache = CacheConfig(block_size=4, num_blocks=16)
    with pytest.raises(ValueError, match="^" + re.escape(
            "preemption_mode='swap' with a sliding window is not supported (its block tables have holes the swap "
            "copies do not keep); use preemption_mode='recompute'") + "$"):
        LLMEngine(with_window(model, 6), tok, cache, SchedulerConfig(preemption_mode="swap", swap_space=8))
    assert LLMEngine(with_window(model, 6), tok, cache, SchedulerConfig()).swapper is None


def test_the_swap_pool_is_host_memory_pinned_for_a_cuda_pool(monkeypatch):
    """The swap pool copies the runner pool's block shape and dtype and lives on the CPU even where CUDA is the
    default device; for a CUDA pool (faked: only its sizes are read) its K and V are pinned (page-locked, for
    fast, asynchronous copies), for a CPU pool they are not."""
    pinned = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # KVCachePool's default device would be cuda
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda t: pinned.append(t.shape) or t)
    for device, pins in (("cpu", []), ("cuda", [(2, 16, 4, 2, 8)] * 2)):
        s = scheduler(3)
        pool = SimpleNamespace(num_layers=2, block_size=BS, num_kv_heads=2, head_dim=8, dtype=torch.float16,
                               device=torch.device(device))
        swap = attach_swapper(s, SimpleNamespace(pool=pool)).pool
        assert (swap.device, swap.dtype, tuple(swap.key_cache.shape)) == (torch.device("cpu"), torch.float16,
                                                                           (2, 16, 4, 2, 8))
        for cache in (swap.key_cache, swap.value_cache):
            assert (cache.device.type, cache.dtype) == ("cpu", torch.float16)
        assert pinned == pins
        pinned.clear()
