"""A batch of sequences on random tensors: the paged pool and its contiguous twin, step by step.

No model here: every token's K/V is random (seeded), written once through `slot_mapping` into the paged pool and
appended to the sequence's `ContiguousKVCache`. Decode reads history back through the block tables and compares
with the twin. The batch-decode page, the bug lab's random-tensor symptoms and the property tests all drive this.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from paged.addressing import PAD_SLOT, slot_mapping
from paged.attention import contiguous_attention_decode, paged_attention_decode, tolerance
from paged.block_manager import BlockManager
from paged.checks import as_int
from paged.kv_cache import ContiguousKVCache, KVCachePool, write_kv
from paged.sequence import Sequence, SequenceStatus


@dataclass
class DecodeCheck:
    """Paged vs contiguous output of one sequence's decode query."""

    seq_id: int
    context_len: int
    max_abs_err: float
    rel_err: float
    ok: bool


class Playground:
    """One layer's paged pool + block manager + a contiguous twin per sequence, all on random K/V."""

    def __init__(self, num_blocks: int = 16, block_size: int = 4, num_heads: int = 4, num_kv_heads: int = 2,
                 head_dim: int = 8, dtype: torch.dtype = torch.float32, device: str | torch.device | None = None,
                 seed: int = 0, shuffle: bool = True) -> None:
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        self.pool = KVCachePool(1, num_blocks, block_size, num_kv_heads, head_dim, dtype, device)
        self.manager = BlockManager(num_blocks, block_size, watermark=0.0, seed=seed if shuffle else None)
        self.num_heads, self.dtype, self.device = num_heads, dtype, self.pool.device
        self.generator = torch.Generator().manual_seed(seed)  # K/V values
        self.query_generator = torch.Generator().manual_seed(seed + 1)  # check() queries: never shift the K/V stream
        self.sequences: dict[int, Sequence] = {}
        self.twins: dict[int, ContiguousKVCache] = {}
        self.last_write: dict[int, list[int]] = {}  # seq_id -> slots written by the latest step
        # what the pool holds, slot -> (seq_id, token_index) of the K/V last written there: where writes really
        # went, so a figure draws the pool's contents (a misplaced write included), never the intended layout
        self.holds: dict[int, tuple[int, int]] = {}
        self._next_id = 0

    @property
    def block_size(self) -> int:
        return self.pool.block_size

    def _random_kv(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (n, self.pool.num_kv_heads, self.pool.head_dim)
        k = torch.randn(shape, generator=self.generator).to(self.device, self.dtype)
        v = torch.randn(shape, generator=self.generator).to(self.device, self.dtype)
        return k, v

    def _write(self, seq: Sequence, start: int, end: int, shift: int = 0) -> None:
        """Write tokens [start, end) of seq: the pool at their slots (+ shift: a misplaced write), the twin in
        token order."""
        k, v = self._random_kv(end - start)
        slots = slot_mapping(seq.block_table, start, end, self.block_size, device=self.device) + shift
        slots = torch.where(slots < self.pool.num_slots, slots, PAD_SLOT)  # only a misplaced write can overflow
        write_kv(*self.pool.layer(0), k, v, slots)
        self.twins[seq.seq_id].update(0, torch.arange(start, end), k, v)
        self.last_write[seq.seq_id] = slots.tolist()
        self.record_writes(seq.seq_id, start, self.last_write[seq.seq_id])

    def record_writes(self, seq_id: int, start: int, slots: list[int]) -> None:
        """Note in `holds` that tokens start, start + 1, … of `seq_id` went to `slots` (-1: dropped, skipped)."""
        for token_index, slot in enumerate(slots, start):
            if slot >= 0:
                self.holds[slot] = (seq_id, token_index)

    def add_sequence(self, prompt_len: int, block_ids: list[int] | None = None) -> Sequence:
        """Prefill a new sequence of prompt_len tokens: allocate blocks (from the free list, or exactly
        `block_ids`, one per block the prompt needs), write the prompt's K/V, and sample (here: invent) its first
        token. Raises ValueError (nothing changed) for a bad prompt_len, a wrong number of block ids, ids that are
        not free blocks, or a pool without room."""
        prompt_len = as_int(prompt_len, "prompt_len", 1)
        seq = Sequence(self._next_id, prompt_token_ids=[0] * prompt_len)
        if block_ids is not None:  # a drawn table: those blocks go to the head of the free list, allocate takes them
            needed = seq.blocks_needed(self.block_size)
            if not isinstance(block_ids, (list, tuple)) or len(block_ids) != needed:
                raise ValueError(f"a sequence of {prompt_len} tokens needs a list of exactly {needed} block ids "
                                 f"(blocks of {self.block_size}), got {block_ids!r}")
            self.manager.move_to_front(block_ids)  # raises before anything changes
        self.manager.allocate(seq)  # raises before anything changes
        self._next_id += 1
        seq.status = SequenceStatus.RUNNING
        self.sequences[seq.seq_id] = seq
        self.twins[seq.seq_id] = ContiguousKVCache(1, self.pool.num_kv_heads, self.pool.head_dim, self.dtype,
                                                   self.device)
        self._write(seq, 0, prompt_len)
        seq.on_prefill_done(first_token_id=0)
        return seq

    def running(self) -> list[Sequence]:
        return [s for s in self.sequences.values() if s.status is SequenceStatus.RUNNING]

    def can_decode(self, seq_ids: list[int] | None = None) -> bool:
        """Enough free blocks for every listed (default: running) sequence to append one slot."""
        seqs = self.running() if seq_ids is None else [self.sequences[i] for i in seq_ids]
        return sum(self.manager.needs_new_block(s) for s in seqs) <= self.manager.num_free_blocks

    def decode_step(self, seq_ids: list[int] | None = None, misplace: int | None = None) -> dict[int, int]:
        """One decode step for the listed (default: all running) sequences: append_slot, write the newest token's
        K/V at that slot, cached += 1, one more generated token. Returns seq_id -> slot written.

        misplace: a bug to watch: sequence `misplace` writes its newest token's K/V one slot past its own (its
        contiguous twin gets it right); past the pool's last slot the write is dropped (slot -1: skipped)."""
        seqs = self.running() if seq_ids is None else [self.sequences[i] for i in seq_ids]
        if not self.can_decode([s.seq_id for s in seqs]):
            raise ValueError("not enough free blocks for every sequence to append a slot; finish one first")
        written = {}
        for seq in seqs:
            slot = self.manager.append_slot(seq)
            shift = int(seq.seq_id == misplace)
            self._write(seq, seq.cached_token_count, seq.cached_token_count + 1, shift)
            target = slot + shift if slot + shift < self.pool.num_slots else PAD_SLOT
            assert self.last_write[seq.seq_id] == [target], "write slot and block manager slot disagree"
            seq.on_decode_done(next_token_id=0)
            written[seq.seq_id] = target
        return written

    def finish(self, seq_id: int) -> list[int]:
        """Return a sequence's blocks to the free list."""
        if seq_id not in self.sequences:
            raise ValueError(f"unknown sequence {seq_id}")
        seq = self.sequences[seq_id]
        released = self.manager.free(seq)
        seq.status = SequenceStatus.FINISHED
        bs = self.block_size
        for block in released:  # a free block's old K/V are nobody's tokens any more
            for slot in range(block * bs, (block + 1) * bs):
                self.holds.pop(slot, None)
        del self.twins[seq_id]
        return released

    def check(self, seq_ids: list[int] | None = None, impl: str = "gather") -> list[DecodeCheck]:
        """Decode a random query per sequence through the paged pool and through its twin; compare."""
        seqs = self.running() if seq_ids is None else [self.sequences[i] for i in seq_ids]
        if not seqs:
            return []
        head_dim = self.pool.head_dim
        query = torch.randn(len(seqs), self.num_heads, head_dim, generator=self.query_generator).to(
            self.device, self.dtype)
        lens = [s.cached_token_count for s in seqs]
        paged = paged_attention_decode(query, *self.pool.layer(0), [s.block_table for s in seqs], lens, impl=impl)
        out = []
        for b, seq in enumerate(seqs):
            keys, values = self.twins[seq.seq_id].get(0)
            ref = contiguous_attention_decode(query[b:b + 1].double(), keys[None].double(), values[None].double(),
                                              [lens[b]])[0]
            err = (paged[b].double() - ref).abs().max().item()
            rel = err / max(ref.abs().max().item(), 1e-12)
            out.append(DecodeCheck(seq.seq_id, lens[b], err, rel, rel < tolerance(self.dtype)))
        return out
