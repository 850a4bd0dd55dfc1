"""The ModelRunner: turns scheduled sequences into model inputs, runs the model, returns next-token logits.

It builds input_ids, positions, slot_mapping, block_tables (padded with -1) and context_lens, and hands the model
an attention backend that knows where K/V live:
- PagedBackend writes the step's K/V through slot_mapping into the pool and reads history through block tables;
- ContiguousBackend appends them to each sequence's ContiguousKVCache (the reference twin).
The model's weights and math are identical either way; only where K and V come from differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F

from ..addressing import PAD_SLOT, pad_block_tables, validate_block_table
from ..attention import attention, paged_attention_decode
from ..faults import NUM_PAD_ROWS, Fault, writer_block_size
from ..kv_cache import ContiguousKVCache, KVCachePool, write_kv
from ..sequence import Sequence


@dataclass
class BatchInput:
    """Model inputs of one step; tokens of the scheduled sequences back to back."""

    is_prefill: bool
    seq_ids: list[int]
    input_ids: torch.Tensor  # [N] int64
    positions: torch.Tensor  # [N] int64
    slot_mapping: torch.Tensor  # [N] int64 (paged layout; -1 = skip)
    block_tables: torch.Tensor  # [B, max_blocks] int32, -1 padded
    context_lens: torch.Tensor  # [B] int64: history read by each sequence, this step's tokens included
    query_lens: list[int]  # tokens fed per sequence

    @cached_property
    def starts(self) -> list[int]:
        """Where each sequence's tokens start in the batch (computed once: the engine reads it per sequence)."""
        out, at = [], 0
        for n in self.query_lens:
            out.append(at)
            at += n
        return out


def batch_slot_mapping(block_tables: torch.Tensor, rows: torch.Tensor, token_index: torch.Tensor,
                       block_size: int) -> torch.Tensor:
    """Slots of many tokens of many sequences at once: token token_index[k] of the sequence whose (-1 padded) block
    table is block_tables[rows[k]]. block_tables [B, W] int; rows, token_index [N] int64 -> slots [N] int64.

    The address chain of `paged.addressing.locate` / `slot_mapping`, vectorised over the whole batch (tests check it
    equals slot_mapping sequence by sequence). Raises ValueError if a token's logical block is -1 or beyond W.
    """
    logical_block_id = token_index // block_size
    if logical_block_id.numel() and int(logical_block_id.max()) >= block_tables.shape[1]:
        raise ValueError(f"a token's logical block is beyond the block tables' width {block_tables.shape[1]}")
    physical_block_id = block_tables.long()[rows, logical_block_id]
    if (physical_block_id < 0).any():
        k = int((physical_block_id < 0).nonzero()[0])
        raise ValueError(f"token {int(token_index[k])} of batch row {int(rows[k])} maps to a -1 entry of its block "
                         "table (no physical block)")
    return physical_block_id * block_size + token_index % block_size


def prepare_inputs(seqs: list[Sequence], block_size: int, is_prefill: bool, device: torch.device,
                   paged: bool = True, num_tokens: list[int] | None = None) -> BatchInput:
    """Feed each sequence's uncached tokens: token index cached_token_count … num_tokens - 1.

    With `num_tokens` (chunked prefill: tokens fed per sequence), feed cached_token_count … cached + that - 1; the
    context then ends with the chunk, and causal attention aligned to the end keeps each query on its own past.

    At prefill that is the whole prompt (plus, after a preemption, the generated tokens to recompute); at decode it
    is exactly the last generated token, at position num_tokens - 1, written at the slot for that index. Built per
    batch with torch (no per-token Python beyond reading a prefill's token ids).
    """
    starts = [seq.cached_token_count for seq in seqs]
    lens = ([seq.num_tokens for seq in seqs] if num_tokens is None
            else [start + n for start, n in zip(starts, num_tokens)])
    assert all(end <= seq.num_tokens for seq, end in zip(seqs, lens)), "a chunk runs past the known tokens"
    qlens = [end - start for start, end in zip(starts, lens)]
    assert all(n > 0 for n in qlens), "a scheduled sequence has nothing to feed"
    if is_prefill:
        ids = [t for seq, start, end in zip(seqs, starts, lens) for t in seq.token_ids[start:end]]
        query_lens = torch.tensor(qlens, dtype=torch.long)
        rows = torch.repeat_interleave(torch.arange(len(seqs)), query_lens)  # [N] batch row of each fed token
        first = torch.cumsum(query_lens, 0) - query_lens  # [B] where each sequence's tokens start in the batch
        positions = torch.tensor(starts, dtype=torch.long)[rows] + torch.arange(len(ids)) - first[rows]  # index
    else:
        assert all(n == 1 for n in qlens), "decode feeds exactly one token per sequence"
        ids = [seq.last_token_id for seq in seqs]
        rows = torch.arange(len(seqs))  # one token per sequence, so N == B
        positions = torch.tensor(starts, dtype=torch.long)  # the last token's index: cached_token_count
    if paged:
        # The BlockManager's tables hold ints: pad them in one tensor call (prepare checks them per step).
        width = max(1, max((len(s.block_table) for s in seqs), default=0))
        tables = torch.tensor([s.block_table + [PAD_SLOT] * (width - len(s.block_table)) for s in seqs],
                              dtype=torch.int32)
        slots = batch_slot_mapping(tables, rows, positions, block_size)
    else:
        tables = torch.zeros(len(seqs), 1, dtype=torch.int32)
        slots = torch.full((len(ids),), -1, dtype=torch.long)
    return BatchInput(
        is_prefill=is_prefill,
        seq_ids=[s.seq_id for s in seqs],
        input_ids=torch.tensor(ids, dtype=torch.long, device=device),
        positions=positions.to(device),
        slot_mapping=slots.to(device),
        block_tables=tables.to(device),
        context_lens=torch.tensor(lens, dtype=torch.long, device=device),
        query_lens=qlens,
    )


def check_block_tables(block_tables: torch.Tensor, context_lens: torch.Tensor, num_blocks: int, block_size: int,
                       tables: list[list[int]]) -> None:
    """`validate_block_table`'s rules for a whole batch in one vectorised pass: in each row of block_tables
    [B, W] (-1 padded) the first ceil(context_lens[b] / block_size) entries exist, lie in [0, num_blocks) and are
    distinct. On a violation the per-sequence check runs on `tables` (the same tables as lists) and raises its
    ValueError naming the entry; if it finds nothing a ValueError still names the batch row."""
    width = block_tables.shape[1]
    used = (context_lens + (block_size - 1)) // block_size  # [B] logical blocks each sequence reads
    cols = torch.arange(width, device=block_tables.device)
    in_use = cols < used[:, None]  # [B, W]
    # Unused cells get distinct negatives, so sorting each row puts a repeated used id next to its twin.
    keyed = torch.where(in_use, block_tables, -1 - cols).sort(dim=1).values
    bad = ((used > width) | (keyed >= num_blocks).any(dim=1) | ((keyed < 0).sum(dim=1) != width - used)
           | (keyed[:, 1:] == keyed[:, :-1]).any(dim=1))
    if bool(bad.any()):
        row = int(bad.nonzero()[0])
        validate_block_table(tables[row], num_blocks, block_size, int(context_lens[row]))
        raise ValueError(f"batch row {row}: block table {tables[row]} does not cover context_len "
                         f"{int(context_lens[row])} with distinct blocks in [0, {num_blocks})")


class PagedBackend:
    """Attention over the paged pool: write this step's K/V at their slots, then read history through tables."""

    def __init__(self, pool: KVCachePool, batch: BatchInput, impl: str = "gather", fault: Fault | None = None) -> None:
        self.pool, self.batch, self.impl, self.fault = pool, batch, impl, fault
        self.lens = batch.context_lens.tolist()

    def _write(self, key_cache, value_cache, k, v) -> None:
        write_kv(key_cache, value_cache, k, v, self.batch.slot_mapping, validate=False)
        if self.fault is Fault.PAD_NOT_SKIPPED:  # padded rows keep slot -1, and -1 wraps to the pool's last slot
            last = torch.full((NUM_PAD_ROWS,), self.pool.num_slots - 1, dtype=torch.long, device=k.device)
            pad_k, pad_v = k[:1].expand(NUM_PAD_ROWS, *k.shape[1:]), v[:1].expand(NUM_PAD_ROWS, *v.shape[1:])
            write_kv(key_cache, value_cache, pad_k.contiguous(), pad_v.contiguous(), last, validate=False)

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q [N, num_heads, head_dim]; k, v [N, num_kv_heads, head_dim] -> [N, num_heads, head_dim]"""
        key_cache, value_cache = self.pool.layer(layer)
        if not self.batch.is_prefill:
            read_first = self.fault is Fault.EARLY_INCREMENT  # counted as cached before it was written
            if not read_first:
                self._write(key_cache, value_cache, k, v)
            out = paged_attention_decode(q, key_cache, value_cache, self.batch.block_tables,
                                         self.batch.context_lens, impl=self.impl, validate=False)
            if read_first:
                self._write(key_cache, value_cache, k, v)
            return out
        self._write(key_cache, value_cache, k, v)
        # Prefill: read every sequence's whole context back through its block table, one gather for the batch
        # (slots as slot_mapping gives them), then causal attention per sequence.
        flat = (-1, *key_cache.shape[2:])  # the pool as [num_slots, num_kv_heads, head_dim]
        slots = self.context_slots
        keys, values = key_cache.reshape(flat)[slots], value_cache.reshape(flat)[slots]
        out, at = [], 0
        for start, n, ctx in zip(self.batch.starts, self.batch.query_lens, self.lens):
            out.append(causal_attention(q[start:start + n], keys[at:at + ctx], values[at:at + ctx]))
            at += ctx
        return torch.cat(out)

    @cached_property
    def context_slots(self) -> torch.Tensor:
        """[sum of context_lens] int64: the slots of tokens 0 … context_len - 1 of each sequence, back to back
        (the same for every layer, so computed once per step)."""
        lens = self.batch.context_lens.cpu()
        rows = torch.repeat_interleave(torch.arange(len(self.lens)), lens)
        token_index = torch.arange(int(lens.sum())) - (torch.cumsum(lens, 0) - lens)[rows]
        slots = batch_slot_mapping(self.batch.block_tables.cpu(), rows, token_index, self.pool.block_size)
        return slots.to(self.pool.key_cache.device)


def causal_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """`paged.attention.attention(q, keys, values, causal=True)` through SDPA (one fused call): q [n, H, D], keys /
    values [ctx, K, D] with ctx >= n; query i sees keys 0 … ctx - n + i. Computed in float32 (float64 stays float64),
    returned in q's dtype."""
    n, ctx = q.shape[0], keys.shape[0]
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    # SDPA's is_causal aligns the mask to the top left: right for ctx == n only; otherwise an explicit mask.
    mask = None if ctx == n else (torch.arange(ctx, device=q.device)[None, :]
                                  <= torch.arange(n, device=q.device)[:, None] + (ctx - n))
    out = F.scaled_dot_product_attention(q.to(compute).transpose(0, 1), keys.to(compute).transpose(0, 1),
                                         values.to(compute).transpose(0, 1), attn_mask=mask, is_causal=mask is None,
                                         enable_gqa=q.shape[1] != keys.shape[1])  # [H, n, D]
    return out.transpose(0, 1).to(q.dtype)


class ContiguousBackend:
    """Attention over each sequence's ContiguousKVCache: the reference twin of PagedBackend."""

    def __init__(self, caches: list[ContiguousKVCache], batch: BatchInput) -> None:
        self.caches, self.batch = caches, batch

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = []
        for cache, start, n in zip(self.caches, self.batch.starts, self.batch.query_lens):
            sl = slice(start, start + n)
            keys, values = cache.update(layer, self.batch.positions[sl], k[sl], v[sl])
            out.append(attention(q[sl], keys, values, causal=True))
        return torch.cat(out)


class ModelRunner:
    """Owns the KV storage of one layout and runs the model on a scheduled batch."""

    def __init__(self, model: torch.nn.Module, num_blocks: int, block_size: int, kv_layout: str = "paged",
                 attn_impl: str = "gather", fault: Fault | None = None) -> None:
        if kv_layout not in ("paged", "contiguous"):
            raise ValueError(f"kv_layout must be 'paged' or 'contiguous', got {kv_layout!r}")
        if fault is not None and kv_layout != "paged":
            raise ValueError("faults are injected into the paged layout only; the contiguous twin is the reference")
        self.fault = fault
        self._rows: list[list[int]] = []  # USE_AFTER_FREE: the buggy per-row block table cache
        self.model, self.kv_layout, self.attn_impl, self.block_size = model, kv_layout, attn_impl, block_size
        cfg = model.config
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.num_blocks = num_blocks
        self.pool = (KVCachePool(cfg.num_hidden_layers, num_blocks, block_size, cfg.num_key_value_heads,
                                 cfg.head_dim, self.dtype, self.device) if kv_layout == "paged" else None)
        self.contiguous: dict[int, ContiguousKVCache] = {}

    def _contiguous_cache(self, seq: Sequence) -> ContiguousKVCache:
        cache = self.contiguous.get(seq.seq_id)
        if cache is None:
            cfg = self.model.config
            cache = ContiguousKVCache(cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim, self.dtype,
                                      self.device, capacity=max(16, seq.num_tokens))
            self.contiguous[seq.seq_id] = cache
        cache.truncate(seq.cached_token_count)  # after a preemption the twin forgets its cache too
        return cache

    def fork(self, parent_id: int, child_id: int) -> None:
        """A child shares its parent's history: the paged pool shares blocks (BlockManager.fork); the contiguous
        twin has nothing to share, so it copies the parent's cache."""
        if self.pool is None and parent_id in self.contiguous:
            self.contiguous[child_id] = self.contiguous[parent_id].clone()

    def copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        """Carry out copy-on-write: block src's K/V (every layer) into block dst."""
        if self.pool is None or not copies:
            return
        src = torch.tensor([c[0] for c in copies], device=self.device)
        dst = torch.tensor([c[1] for c in copies], device=self.device)
        for cache in (self.pool.key_cache, self.pool.value_cache):
            cache.index_copy_(1, dst, cache.index_select(1, src))

    def release(self, seq_id: int) -> None:
        """Drop a finished sequence's contiguous cache (the paged pool is managed by the BlockManager)."""
        self.contiguous.pop(seq_id, None)

    def prepare(self, seqs: list[Sequence], is_prefill: bool, num_tokens: list[int] | None = None) -> BatchInput:
        """Model inputs for `seqs`; num_tokens: tokens fed per sequence (chunked prefill), default all uncached."""
        batch = prepare_inputs(seqs, self.block_size, is_prefill, self.device, paged=self.pool is not None,
                               num_tokens=num_tokens)
        if self.fault is not None:
            return self._inject(seqs, batch)  # a fault bypasses the checks so its symptom can be watched
        if self.pool is not None:
            check_block_tables(batch.block_tables, batch.context_lens, self.num_blocks, self.block_size,
                               [s.block_table for s in seqs])
        return batch

    def _inject(self, seqs: list[Sequence], batch: BatchInput) -> BatchInput:
        """Apply this runner's fault to the step's inputs (see paged/faults.py)."""
        fault, bs, decode = self.fault, self.block_size, not batch.is_prefill
        if fault is Fault.SLOT_OFF_BY_ONE:
            batch.slot_mapping = (batch.slot_mapping + 1).clamp_max(self.pool.num_slots - 1)
        elif fault in (Fault.BLOCK_SIZE_MISMATCH, Fault.ALIASED_BLOCKS):
            slots, tables = [], []
            for seq in seqs:
                table = list(seq.block_table)
                if fault is Fault.ALIASED_BLOCKS and len(table) >= 2:
                    table[1] = table[0]
                tables.append(table)
                wbs = writer_block_size(bs) if fault is Fault.BLOCK_SIZE_MISMATCH else bs
                for t in range(seq.cached_token_count, seq.num_tokens):
                    slots.append(table[min(t // wbs, len(table) - 1)] * wbs + t % wbs)
            batch.slot_mapping = torch.tensor(slots, dtype=torch.long, device=self.device)
            if fault is Fault.ALIASED_BLOCKS:
                batch.block_tables = pad_block_tables(tables).to(self.device)
        elif fault is Fault.POSITION_OFF_BY_ONE and decode:
            batch.positions = batch.positions + 1
        elif fault is Fault.LATE_INCREMENT and decode:
            batch.context_lens = (batch.context_lens - 1).clamp_min(1)
        elif fault is Fault.USE_AFTER_FREE and decode:
            rows = []
            for i, seq in enumerate(seqs):
                if i >= len(self._rows) or len(self._rows[i]) < len(seq.block_table):
                    self._rows[i:i + 1] = [list(seq.block_table)]  # refreshed only when the row grows: the bug
                rows.append(self._rows[i])
            batch.block_tables = pad_block_tables(rows).to(self.device)
        return batch

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], batch: BatchInput) -> torch.Tensor:
        """Run the model; returns the logits of each sequence's last fed token: [B, vocab]."""
        if self.pool is not None:
            backend = PagedBackend(self.pool, batch, self.attn_impl, self.fault)
        else:
            backend = ContiguousBackend([self._contiguous_cache(s) for s in seqs], batch)
        last = None  # decode feeds one token per sequence: every row is a last token
        if batch.is_prefill:
            last = torch.tensor([s + n - 1 for s, n in zip(batch.starts, batch.query_lens)], device=self.device)
        return self.model(batch.input_ids, batch.positions, backend=backend, rows=last).float()  # [B, vocab]
