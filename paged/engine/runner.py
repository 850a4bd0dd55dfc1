"""The ModelRunner: scheduled sequences -> model inputs -> the model -> logits [B, vocab].

It builds input_ids, positions, slot_mapping, block_tables (padded with -1) and context_lens, and
hands the model an attention backend that knows where K/V live:
- PagedBackend writes the step's K/V through slot_mapping into the pool and reads history through
  block tables;
- ContiguousBackend appends them to each sequence's ContiguousKVCache (the reference twin).
The model's weights and math are identical either way; only where K and V come from differs.
"""

from __future__ import annotations

import torch

from ..addressing import (PAD_SLOT, batch_slot_mapping, block_tables, decode_slots,
                          validate_block_tables)
from ..attention import attention_sdpa, paged_attention_decode, paged_attention_prefill
from ..attention_checks import check_scale
from ..batch import BatchInput
from ..faults import Fault, FaultHook, fault_hook
from ..kernels import REFERENCE_IMPLS, DecodeStep
from ..kernels.kv_fast import pool_zeros
from ..kv_cache import ContiguousKVCache, KVCachePool, write_kv
from ..sequence import Sequence


def prepare_inputs(seqs: list[Sequence], block_size: int, is_prefill: bool, device: torch.device,
                   paged: bool = True, num_tokens: list[int] | None = None) -> BatchInput:
    """Inputs feeding each sequence its uncached tokens, cached_token_count … num_tokens - 1.

    At decode that is the last generated token. With `num_tokens` (chunked prefill: tokens fed per
    sequence) the context ends with the chunk; causal attention aligned to the end keeps each query
    on its own past. slot_mapping and block_tables come from paged/addressing.py.
    Raises: ValueError as `batch_slot_mapping` does (a token without its physical block)."""
    starts = [seq.cached_token_count for seq in seqs]
    ends = ([seq.num_tokens for seq in seqs] if num_tokens is None
            else [a + n for a, n in zip(starts, num_tokens)])
    query_lens = [end - start for start, end in zip(starts, ends)]
    assert all(0 < n and end <= seq.num_tokens
               for seq, n, end in zip(seqs, query_lens, ends)), "nothing to feed"
    assert is_prefill or all(n == 1 for n in query_lens), (
        "decode feeds exactly one token per sequence")
    ids = [t for seq, start, end in zip(seqs, starts, ends)
           for t in ((seq.last_token_id,) if end - start == 1 == seq.num_tokens - start
                     else seq.token_ids[start:end])]
    tables = [seq.block_table for seq in seqs]
    # [B, max_blocks]
    padded = block_tables(tables) if paged else torch.zeros(len(seqs), 1, dtype=torch.int32)
    # a decode step: one token per sequence, its slot in plain ints
    if all(n == 1 for n in query_lens):
        positions = torch.tensor(starts, dtype=torch.long)
        slots = torch.tensor(decode_slots(tables, starts, block_size) if paged
                             else [PAD_SLOT] * len(seqs),
                             dtype=torch.long)
    else:
        lens = torch.tensor(query_lens, dtype=torch.long)
        # [N] batch row of each fed token
        rows = torch.repeat_interleave(torch.arange(len(seqs)), lens)
        first = torch.cumsum(lens, 0) - lens  # [B] where each sequence's tokens start in the batch
        # index
        positions = torch.tensor(starts,
                                 dtype=torch.long)[rows] + torch.arange(len(ids)) - first[rows]
        slots = (batch_slot_mapping(padded, rows, positions, block_size) if paged
                 else torch.full((len(ids),), PAD_SLOT, dtype=torch.long))  # [N] int64
    return BatchInput(is_prefill=is_prefill, seq_ids=[s.seq_id for s in seqs],
                      input_ids=torch.tensor(ids, dtype=torch.long, device=device),
                      positions=positions.to(device),
                      slot_mapping=slots.to(device), block_tables=padded.to(device),
                      context_lens=torch.tensor(ends, dtype=torch.long, device=device),
                      query_lens=query_lens,
                      chunked=num_tokens is not None)


class PagedBackend:
    """Attention over the paged pool, a layer at a time: write_kv, then read through the tables.

    The read is paged_attention_decode / paged_attention_prefill. `impl` names the decode kernel;
    `fast` takes write_kv's C copy. `fault`: an injected fault's hook (or None), which writes
    instead of write_kv and may read before it writes (EARLY_INCREMENT). `ran`: the attention call
    and kernel that ran last (the trace's `attention` and `kernel`).
    """

    def __init__(self, pool: KVCachePool, batch: BatchInput, impl: str = "gather",
                 fault: FaultHook | None = None,
                 fast: bool = False) -> None:
        self.pool, self.batch, self.impl, self.fault, self.fast = pool, batch, impl, fault, fast
        # impl "native", decode: planned by the step's first layer
        self.step: DecodeStep | None = None
        self.ran = ("", "")
        if batch.is_prefill:  # read as lists by paged_attention_prefill, the same for every layer
            self.tables, self.lens = batch.block_tables.tolist(), batch.context_lens.tolist()

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:
        """One layer's attention: q [N, num_heads, head_dim]; k, v [N, num_kv_heads, head_dim].

        Returns [N, num_heads, head_dim]."""
        key_cache, value_cache = self.pool.layer(layer)
        # the bug: attend, then write
        if self.fault and self.fault.read_first and not self.batch.is_prefill:
            out = self.decode(q, key_cache, value_cache)
            self.fault.write(key_cache, value_cache, k, v, self.batch.slot_mapping, self.fast)
            return out
        if self.fault:
            self.fault.write(key_cache, value_cache, k, v, self.batch.slot_mapping, self.fast)
        # slots came through the address chain: none is -1 (pads=False), and the engine checked them
        else:
            write_kv(key_cache, value_cache, k, v, self.batch.slot_mapping, validate=False,
                     pads=False,
                     fast=self.fast)
        if self.batch.is_prefill:
            self.ran = ("paged_attention_prefill", "loop" if self.impl == "loop" else "sdpa")
            return paged_attention_prefill(q, key_cache, value_cache, self.tables, self.lens,
                                           self.batch.query_lens,
                                           impl=self.impl, validate=False)
        return self.decode(q, key_cache, value_cache)

    def decode(self, q: torch.Tensor, key_cache: torch.Tensor,
               value_cache: torch.Tensor) -> torch.Tensor:
        """paged_attention_decode of this step's batch: q [B, num_heads, head_dim] -> same shape.

        The C kernel is checked and planned once per step (DecodeStep); every layer reuses it."""
        if self.impl == "native" and self.step is None:
            self.step = DecodeStep(q, self.pool.key_cache, self.pool.value_cache,
                                   self.batch.block_tables,
                                   self.batch.context_lens, check_scale(None, q.shape[-1]))
        self.ran = ("paged_attention_decode", self.impl)
        return paged_attention_decode(q, key_cache, value_cache, self.batch.block_tables,
                                      self.batch.context_lens,
                                      impl=self.impl, validate=False, step=self.step)


class ContiguousBackend:
    """Attention over each sequence's ContiguousKVCache: the reference twin of PagedBackend.

    Each sequence attends over its own contiguous keys and values in one SDPA call
    (attention_sdpa: `attention`'s math, half its time on a decode step); no table is read."""

    def __init__(self, caches: list[ContiguousKVCache], batch: BatchInput) -> None:
        self.caches, self.batch = caches, batch

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:
        out = []
        for cache, start, n in zip(self.caches, self.batch.starts, self.batch.query_lens):
            sl = slice(start, start + n)
            keys, values = cache.update(layer, self.batch.positions[sl], k[sl], v[sl])
            # a lone query is the context's newest token: it sees every key, no mask to build
            out.append(attention_sdpa(q[sl], keys, values, causal=n > 1))
        return torch.cat(out)


class ModelRunner:
    """Owns the KV storage of one layout and runs the model on a scheduled batch.

    attn_impl names the decode kernel. A reference impl ("loop", "gather") keeps the whole step on
    the reference path; a paged/kernels kernel also takes the other fast paths (`fast`: the pool
    in huge pages, the K/V write in one C call). Same tokens either way.
    Raises: ValueError for an unknown kv_layout, or a fault with the contiguous layout.
    """

    def __init__(self, model: torch.nn.Module, num_blocks: int, block_size: int,
                 kv_layout: str = "paged",
                 attn_impl: str = "gather", fault: Fault | None = None) -> None:
        if kv_layout not in ("paged", "contiguous"):
            raise ValueError(f"kv_layout must be 'paged' or 'contiguous', got {kv_layout!r}")
        if fault is not None and kv_layout != "paged":
            raise ValueError("faults are injected into the paged layout only; the contiguous twin "
                             "is the reference")
        self.fault = fault
        # the fault's hook: None without a fault (the step then takes no hook at all)
        self.hook = fault_hook(fault, block_size, num_blocks * block_size) if fault else None
        # the last run's attention call and kernel (PagedBackend.ran; none: contiguous)
        self.ran = ("", "")
        self.model, self.kv_layout, self.attn_impl, self.block_size = (
            model, kv_layout, attn_impl, block_size)
        cfg = model.config
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.num_blocks = num_blocks
        self.fast = attn_impl not in REFERENCE_IMPLS
        self.pool = (KVCachePool(cfg.num_hidden_layers, num_blocks, block_size,
                                 cfg.num_key_value_heads,
                                 cfg.head_dim, self.dtype, self.device, zeros=pool_zeros
                                 if self.fast else torch.zeros)
                     if kv_layout == "paged" else None)
        self.contiguous: dict[int, ContiguousKVCache] = {}

    def _contiguous_cache(self, seq: Sequence) -> ContiguousKVCache:
        cache = self.contiguous.get(seq.seq_id)
        if cache is None:
            cfg = self.model.config
            cache = ContiguousKVCache(cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim,
                                      self.dtype,
                                      self.device, capacity=max(16, seq.num_tokens))
            self.contiguous[seq.seq_id] = cache
        cache.truncate(seq.cached_token_count)  # after a preemption the twin forgets its cache too
        return cache

    def fork(self, parent_id: int, child_id: int) -> None:
        """Give a child its parent's history: shared blocks (paged), or a copied cache (twin)."""
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
        """Drop a finished sequence's contiguous cache (the BlockManager manages the pool)."""
        self.contiguous.pop(seq_id, None)

    def prepare(self, seqs: list[Sequence], is_prefill: bool,
                num_tokens: list[int] | None = None) -> BatchInput:
        """Model inputs (a BatchInput) for `seqs`; num_tokens: tokens fed each (default: uncached).

        With a fault the inputs are rebuilt through the links it breaks, unchecked, so it shows.
        Raises: ValueError (paged, no fault) for a block table that breaks a rule of the pool."""
        batch = prepare_inputs(seqs, self.block_size, is_prefill, self.device,
                               paged=self.pool is not None,
                               num_tokens=num_tokens)
        if self.pool is None:
            return batch
        tables = [s.block_table for s in seqs]
        if self.hook:
            return self.hook.apply(batch, tables, self.num_blocks)
        validate_block_tables(batch.block_tables, batch.context_lens, self.num_blocks,
                              self.block_size, tables)
        return batch

    def backend(self, seqs: list[Sequence], batch: BatchInput) -> PagedBackend | ContiguousBackend:
        """The attention backend of one run: over the pool (with any fault's hook) or the twin's."""
        if self.pool is not None:
            return PagedBackend(self.pool, batch, self.attn_impl, self.hook, self.fast)
        return ContiguousBackend([self._contiguous_cache(s) for s in seqs], batch)

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], batch: BatchInput) -> torch.Tensor:
        """Run the model; returns the logits of each sequence's last fed token: [B, vocab]."""
        backend = self.backend(seqs, batch)
        last = None  # decode feeds one token per sequence: every row is a last token
        if batch.is_prefill:
            last = torch.tensor([s + n - 1 for s, n in zip(batch.starts, batch.query_lens)],
                                device=self.device)
        # [B, vocab]
        logits = self.model(batch.input_ids, batch.positions, backend=backend, rows=last).float()
        self.ran = backend.ran if isinstance(backend, PagedBackend) else ("", "")
        return logits
