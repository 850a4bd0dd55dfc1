"""The scheduler's swap policy (SchedulerConfig(preemption_mode="swap")), vLLM v0's:

- a victim (the newest running sequence, as for recompute) is swapped out when the swap pool has a
  block for each of its blocks; otherwise it is recomputed, and the step's reason says the swap pool
  was full ("swap_full") or, when the victim needs more blocks than the whole swap pool has, too
  small ("swap_too_small");
- while any sequence waits in the swap pool, no waiting prompt starts: swapped sequences come back
  first, oldest first, as soon as the pool has their blocks plus what every running sequence needs
  for its next token (and the watermark), and they decode in that very step; never in a step that
  preempted;
- a swapped sequence keeps its cached_token_count and its generated tokens: nothing is recomputed.

The block bookkeeping is chapters/swap.py's SwapSpace; the K/V copies are carried out by `apply`,
called by the engine once per step right after scheduling (before copy-on-write and the model write
anything). With the contiguous twin (kv_layout="contiguous") a swapped sequence's ContiguousKVCache
waits in `store` instead: the same decisions, no pool.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import torch

from ..kv_cache import KVCachePool
from ..sequence import Sequence, SequenceStatus
from ..chapters.swap import SwapSpace, copy_blocks_between

if TYPE_CHECKING:  # the Scheduler imports this module: its types are for type checkers only
    from .runner import ModelRunner
    from .scheduler import Scheduler, SchedulerOutput


class Swapper:
    """The swapped queue, the swap pool and what this step swapped, for one Scheduler."""

    def __init__(self, scheduler: "Scheduler") -> None:
        self.scheduler, self.bm = scheduler, scheduler.block_manager
        self.space = SwapSpace(scheduler.config.swap_space)
        self.swapped: deque[Sequence] = deque()  # head = the next to come back
        # the host swap pool's K/V (paged layout; made by attach_swapper)
        self.pool: KVCachePool | None = None
        self.store: dict = {}  # contiguous twin: seq_id -> its ContiguousKVCache while swapped
        self.num_swaps: dict[int, int] = {}  # seq_id -> times swapped out
        self._counted: list[int] = []  # since the last snapshot: whose num_swaps went up
        # this step: seq_id -> (pool block, swap block) pairs
        self.out: dict[int, list[tuple[int, int]]] = {}
        # this step: seq_id -> (swap block, pool block) pairs
        self.into: dict[int, list[tuple[int, int]]] = {}
        # this step's (victim, swap blocks it needed): recomputed instead
        self.fallback: list[tuple[int, int]] = []
        # K/V bytes moved between the pools, both ways, since the engine started
        self.bytes_copied = 0
        # teaching only (the swap page): "no_copy" or "wrong_blocks", see misroute
        self.break_it: str | None = None

    def holds(self, seq: Sequence) -> bool:
        return self.space.holds(seq.seq_id)

    # --- scheduling -------------------------------------------------------------------------------
    def schedule(self) -> "SchedulerOutput":
        """One non-chunked scheduler step, swapped sequences served first (module docstring)."""
        sched = self.scheduler
        self.out, self.into, self.fallback = {}, {}, []
        if self.swapped:
            self._swap_in()
            out = sched._schedule_decode()
            if not out.seqs and not sched.running and self.swapped:
                raise RuntimeError(f"scheduler stuck: seq {self.swapped[0].seq_id} cannot swap in")
        else:
            out = sched._schedule_prefill() or sched._schedule_decode()
        self._explain(out)
        return out

    def _swap_in(self) -> None:
        sched, bm = self.scheduler, self.bm
        needs = sum(bm.append_needs_blocks(sched.running))
        while self.swapped:
            seq = self.swapped[0]
            k = self.space.blocks_to_swap_in(seq.seq_id)
            # its next token starts a new block
            grow = int(seq.cached_token_count >= k * bm.block_size)
            reserve = bm.watermark_blocks if sched.running else 0
            # every running sequence is past its prefill: one seat each
            taken = len(sched.running) + 1
            if (taken > sched.config.max_num_seqs or taken > sched.config.max_num_batched_tokens
                    or bm.num_free_blocks - needs - k - grow < reserve):
                break
            self.swapped.popleft()
            self.into[seq.seq_id] = self.space.swap_in(seq, bm)
            seq.status = SequenceStatus.RUNNING
            sched.running.append(seq)
            needs += grow

    def preempt(self, seq: Sequence) -> list[int] | None:
        """Swap `seq` out if the swap pool has room: the pool blocks released; None: recompute."""
        if not self.space.can_swap_out(seq):
            self.fallback.append((seq.seq_id, len(seq.block_table)))
            return None
        self.scheduler.running.remove(seq)
        self.out[seq.seq_id], released = self.space.swap_out(seq, self.bm)
        seq.status = SequenceStatus.WAITING
        self.swapped.appendleft(seq)  # victims go newest first: the older one comes back first
        self.num_swaps[seq.seq_id] = self.num_swaps.get(seq.seq_id, 0) + 1
        self._counted.append(seq.seq_id)
        return released

    def drop(self, seq: Sequence) -> None:
        """A swapped sequence was aborted: its swap blocks (and twin cache) are released."""
        self.swapped.remove(seq)
        self.space.drop(seq.seq_id)
        self.store.pop(seq.seq_id, None)

    def _explain(self, out: "SchedulerOutput") -> None:
        """Split the step's "preempted" why into swapped out / recomputed; add what came back."""
        swapped = [s for s in out.preempted if s in self.out]
        recomputed = [s for s in out.preempted if s not in self.out]
        why = [w for w in out.why if w[0] != "preempted"]
        if self.into:
            why.insert(0, ("swapped_in", dict(seqs=list(self.into),
                                              blocks=sum(map(len, self.into.values())))))
        if swapped:
            why.append(("swapped_out", dict(seqs=swapped,
                                            blocks=sum(len(self.out[s]) for s in swapped))))
        if recomputed:
            why.append(("preempted", dict(seqs=recomputed)))
        for sid, need in self.fallback:  # too small: even an empty swap pool could not hold it
            code = "swap_too_small" if need > self.space.num_blocks else "swap_full"
            why.append((code, dict(seq=sid, need=need, free=self.space.num_free_blocks,
                                   swap_space=self.space.num_blocks)))
        if self.swapped and self.scheduler.waiting:
            why.append(("swap_wait", dict(count=len(self.swapped))))
        out.why[:] = why

    # --- the copies -------------------------------------------------------------------------------
    def apply(self, runner: ModelRunner) -> dict:
        """Carry out this step's swaps on the K/V; returns the StepTrace fields that tell them.

        Swaps out go first: the pool blocks they release may be reused this step."""
        for sid, pairs in self.out.items():
            if self.pool is not None:
                self.bytes_copied += copy_blocks_between(runner.pool, self.pool, pairs)
            elif sid in runner.contiguous:
                self.store[sid] = runner.contiguous.pop(sid)
        for sid, pairs in self.into.items():
            if self.pool is not None:
                self.bytes_copied += copy_blocks_between(self.pool, runner.pool,
                                                         misroute(pairs, self.break_it))
            elif sid in self.store:
                runner.contiguous[sid] = self.store.pop(sid)
        return dict(swap_out=dict(self.out), swap_in=dict(self.into),
                    swapped=[s.seq_id for s in self.swapped],
                    num_free_swap_blocks=self.space.num_free_blocks,
                    num_swap_blocks=self.space.num_blocks)

    # --- rollback (checkpoint.py) -----------------------------------------------------------------
    def snapshot(self) -> tuple:
        """What restore() needs: the swapped queue and twin caches copied (what is swapped now),
        the swap pool's and the swap counts' changes recorded from here (what a step swaps)."""
        self._counted = []
        return list(self.swapped), self.space.snapshot(), dict(self.store), self._counted

    def restore(self, snap: tuple) -> None:
        swapped, space, store, counted = snap
        self.swapped = deque(swapped)
        self.space.restore(space)
        self.store = dict(store)
        for seq_id in counted:
            self.num_swaps[seq_id] -= 1
            if not self.num_swaps[seq_id]:
                del self.num_swaps[seq_id]
        counted.clear()


BREAKS = ("no_copy", "wrong_blocks")


def misroute(pairs: list[tuple[int, int]], how: str | None) -> list[tuple[int, int]]:
    """The swap-in (swap block, pool block) pairs a broken swapper copies (the page's break-it).

    None: the right ones. "no_copy": none (the table names fresh blocks that never got the K/V
    back). "wrong_blocks": each swap block lands in the pool block of the next logical block (the
    table is right, the data is not). The contiguous twin never breaks.
    Raises: ValueError for an unknown `how`."""
    if how is None:
        return pairs
    if how == "no_copy":
        return []
    if how == "wrong_blocks":
        return [(src, pairs[(i + 1) % len(pairs)][1]) for i, (src, _) in enumerate(pairs)]
    raise ValueError(f"break_it must be None or one of {BREAKS}, got {how!r}")


def make_swapper(scheduler: "Scheduler") -> Swapper | None:
    """A Swapper for a scheduler in swap mode; None in recompute mode (the default)."""
    return Swapper(scheduler) if scheduler.config.preemption_mode == "swap" else None


def attach_swapper(scheduler: "Scheduler", runner: ModelRunner) -> Swapper | None:
    """The engine's swapper with its host swap pool allocated (None in recompute mode).

    The swap pool's blocks have the runner's pool's shape, on the CPU.
    Raises: ValueError (nothing allocated) if that pool is too big or the model has a window."""
    swapper = scheduler.swapper
    if swapper is not None and getattr(scheduler.block_manager, "window", None) is not None:
        raise ValueError("preemption_mode='swap' with a sliding window is not supported (its block "
                         "tables have holes the swap copies do not keep); use "
                         "preemption_mode='recompute'")
    if swapper is not None and runner.pool is not None:
        p = runner.pool
        pinned = (lambda shape, dtype, device:
                  torch.zeros(shape, dtype=dtype, device=device).pin_memory())
        swapper.pool = KVCachePool(p.num_layers, swapper.space.num_blocks, p.block_size,
                                   p.num_kv_heads, p.head_dim,
                                   p.dtype, "cpu", zeros=pinned if p.device.type == "cuda"
                                   else torch.zeros)
    return swapper


def swapped_seqs(scheduler: "Scheduler") -> list[Sequence]:
    """The sequences waiting in the swap pool ([] in recompute mode)."""
    return list(scheduler.swapper.swapped) if scheduler.swapper is not None else []


def preemption_counts(engine, request_id: int) -> tuple[int, int]:
    """(times swapped out, times recomputed) of a request's sequences so far."""
    group = engine.groups[request_id]
    swapper = engine.scheduler.swapper
    swaps = sum(swapper.num_swaps.get(s.seq_id, 0) for s in group) if swapper is not None else 0
    return swaps, sum(s.preemptions for s in group) - swaps
