"""The ModelRunner: turns scheduled sequences into model inputs, runs the model, returns next-token logits.

It builds input_ids, positions, slot_mapping, block_tables (padded with -1) and context_lens, and hands the model
an attention backend that knows where K/V live:
- PagedBackend writes the step's K/V through slot_mapping into the pool and reads history through block tables;
- ContiguousBackend appends them to each sequence's ContiguousKVCache (the reference twin).
The model's weights and math are identical either way; only where K and V come from differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..addressing import pad_block_tables, slot_mapping, validate_block_table
from ..attention import attention, gather_kv, paged_attention_decode
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

    @property
    def starts(self) -> list[int]:
        out, at = [], 0
        for n in self.query_lens:
            out.append(at)
            at += n
        return out


def prepare_inputs(seqs: list[Sequence], block_size: int, is_prefill: bool, device: torch.device,
                   paged: bool = True) -> BatchInput:
    """Feed each sequence's uncached tokens: token index cached_token_count … num_tokens - 1.

    At prefill that is the whole prompt (plus, after a preemption, the generated tokens to recompute); at decode it
    is exactly the last generated token, at position num_tokens - 1, written at the slot for that index.
    """
    ids, pos, slots, lens, qlens = [], [], [], [], []
    for seq in seqs:
        start, end = seq.cached_token_count, seq.num_tokens
        assert end > start, f"sequence {seq.seq_id} has nothing to feed"
        assert is_prefill or end - start == 1, "decode feeds exactly one token per sequence"
        ids.extend(seq.token_ids[start:end])
        pos.extend(range(start, end))
        if paged:
            slots.append(slot_mapping(seq.block_table, start, end, block_size))
        lens.append(end)
        qlens.append(end - start)
    tables = pad_block_tables([s.block_table for s in seqs]) if paged else torch.zeros(len(seqs), 1, dtype=torch.int32)
    return BatchInput(
        is_prefill=is_prefill,
        seq_ids=[s.seq_id for s in seqs],
        input_ids=torch.tensor(ids, dtype=torch.long, device=device),
        positions=torch.tensor(pos, dtype=torch.long, device=device),
        slot_mapping=(torch.cat(slots) if slots else torch.full((len(ids),), -1, dtype=torch.long)).to(device),
        block_tables=tables.to(device),
        context_lens=torch.tensor(lens, dtype=torch.long, device=device),
        query_lens=qlens,
    )


class PagedBackend:
    """Attention over the paged pool: write this step's K/V at their slots, then read history through tables."""

    def __init__(self, pool: KVCachePool, batch: BatchInput, impl: str = "gather") -> None:
        self.pool, self.batch, self.impl = pool, batch, impl
        self.tables = batch.block_tables.tolist()
        self.lens = batch.context_lens.tolist()

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q [N, num_heads, head_dim]; k, v [N, num_kv_heads, head_dim] -> [N, num_heads, head_dim]"""
        key_cache, value_cache = self.pool.layer(layer)
        write_kv(key_cache, value_cache, k, v, self.batch.slot_mapping, validate=False)
        if not self.batch.is_prefill:
            return paged_attention_decode(q, key_cache, value_cache, self.batch.block_tables,
                                          self.batch.context_lens, impl=self.impl, validate=False)
        out = []
        for start, n, table, ctx in zip(self.batch.starts, self.batch.query_lens, self.tables, self.lens):
            keys, values = gather_kv(key_cache, value_cache, table, ctx)
            out.append(attention(q[start:start + n], keys, values, causal=True))
        return torch.cat(out)


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
                 attn_impl: str = "gather") -> None:
        if kv_layout not in ("paged", "contiguous"):
            raise ValueError(f"kv_layout must be 'paged' or 'contiguous', got {kv_layout!r}")
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

    def release(self, seq_id: int) -> None:
        """Drop a finished sequence's contiguous cache (the paged pool is managed by the BlockManager)."""
        self.contiguous.pop(seq_id, None)

    def prepare(self, seqs: list[Sequence], is_prefill: bool) -> BatchInput:
        batch = prepare_inputs(seqs, self.block_size, is_prefill, self.device, paged=self.pool is not None)
        if self.pool is not None:
            for seq, ctx in zip(seqs, batch.context_lens.tolist()):
                validate_block_table(seq.block_table, self.num_blocks, self.block_size, ctx)
        return batch

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], batch: BatchInput) -> torch.Tensor:
        """Run the model; returns the logits of each sequence's last fed token: [B, vocab]."""
        if self.pool is not None:
            backend = PagedBackend(self.pool, batch, self.attn_impl)
        else:
            backend = ContiguousBackend([self._contiguous_cache(s) for s in seqs], batch)
        logits = self.model(batch.input_ids, batch.positions, backend=backend)  # [N, vocab]
        last = torch.tensor([s + n - 1 for s, n in zip(batch.starts, batch.query_lens)], device=logits.device)
        return logits.index_select(0, last).float()
