"""The ModelRunner: turns scheduled sequences into model inputs, runs the model, returns next-token logits.

It builds input_ids, positions, slot_mapping, block_tables (padded with -1) and context_lens, and hands the model
an attention backend that knows where K/V live:
- PagedBackend writes the step's K/V through slot_mapping into the pool and reads history through block tables;
- ContiguousBackend appends them to each sequence's ContiguousKVCache (the reference twin).
The model's weights and math are identical either way; only where K and V come from differs.
"""

from __future__ import annotations

import array
from dataclasses import dataclass
from functools import cached_property

import torch

from ..addressing import PAD_SLOT, batch_slot_mapping
from ..attention import attention, attention_sdpa, paged_attention_decode
from ..attention_checks import check_scale
from ..faults import Fault, FaultHook, fault_hook
from ..kernels.native_step import DecodeStep
from ..kv_cache import ContiguousKVCache, KVCachePool
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
    chunked: bool = False  # built for chunked prefill (tokens fed per sequence given): decodes may sit beside chunks

    @cached_property
    def starts(self) -> list[int]:
        """Where each sequence's tokens start in the batch (computed once: the engine reads it per sequence)."""
        out, at = [], 0
        for n in self.query_lens:
            out.append(at)
            at += n
        return out


def prepare_inputs(seqs: list[Sequence], block_size: int, is_prefill: bool, device: torch.device,
                   paged: bool = True, num_tokens: list[int] | None = None) -> BatchInput:
    """Feed each sequence's uncached tokens: token index cached_token_count … num_tokens - 1.

    With `num_tokens` (chunked prefill: tokens fed per sequence), feed cached_token_count … cached + that - 1; the
    context then ends with the chunk, and causal attention aligned to the end keeps each query on its own past.

    At prefill that is the whole prompt (plus, after a preemption, the generated tokens to recompute); at decode it
    is exactly the last generated token, at position num_tokens - 1, written at the slot for that index. Built per
    batch with torch (no per-token Python beyond reading a prefill's token ids).
    """
    if not is_prefill:
        assert num_tokens is None or all(n == 1 for n in num_tokens), "decode feeds exactly one token per sequence"
        return _decode_inputs(seqs, block_size, device, paged)
    starts = [seq.cached_token_count for seq in seqs]
    lens = ([seq.num_tokens for seq in seqs] if num_tokens is None
            else [start + n for start, n in zip(starts, num_tokens)])
    assert all(end <= seq.num_tokens for seq, end in zip(seqs, lens)), "a chunk runs past the known tokens"
    qlens = [end - start for start, end in zip(starts, lens)]
    assert all(n > 0 for n in qlens), "a scheduled sequence has nothing to feed"
    ids = [t for seq, start, end in zip(seqs, starts, lens) for t in seq.token_ids[start:end]]
    query_lens = torch.tensor(qlens, dtype=torch.long)
    rows = torch.repeat_interleave(torch.arange(len(seqs)), query_lens)  # [N] batch row of each fed token
    first = torch.cumsum(query_lens, 0) - query_lens  # [B] where each sequence's tokens start in the batch
    positions = torch.tensor(starts, dtype=torch.long)[rows] + torch.arange(len(ids)) - first[rows]  # index
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
        chunked=num_tokens is not None,
    )


def _decode_inputs(seqs: list[Sequence], block_size: int, device: torch.device, paged: bool) -> BatchInput:
    """prepare_inputs for a decode step: each sequence's last token, at index cached_token_count. One token per
    sequence, so everything is plain ints: each slot is the address chain (addressing.locate) followed by hand,
    and the tensors are filled from flat int arrays (torch.frombuffer: no per-element conversion). A decode
    step's inputs are a few numbers per sequence. Raises ValueError as `batch_slot_mapping`."""
    b = len(seqs)
    block_lists = [seq.block_table for seq in seqs]
    starts = [seq.cached_token_count for seq in seqs]  # index of the token fed: its position
    # the token fed: the last one; decode feeds exactly one token, so it is the newest and none is cached yet
    last = [seq.generated_token_ids[-1] if seq.generated_token_ids else seq.prompt_token_ids[-1] for seq in seqs]
    assert all(seq.num_tokens == start + 1 for seq, start in zip(seqs, starts)), "decode feeds exactly one token"
    if paged:
        width = max(1, max(map(len, block_lists), default=0))
        # Each slot by the address chain (addressing.locate): physical block * block_size + offset. A -1 entry
        # (no physical block) gives a negative slot and a table too short an IndexError: then the rows are
        # followed one by one for the error naming them.
        try:
            slots = [table[index // block_size] * block_size + index % block_size
                     for table, index in zip(block_lists, starts)]
        except IndexError:
            slots = None
        if slots is None or (slots and min(slots) < 0):
            _refuse_decode_rows(block_lists, starts, block_size, width)
        flat, pad = [], [PAD_SLOT] * width  # flat: the tables row after row, -1 padded to width
        for table in block_lists:
            flat += table
            if len(table) < width:
                flat += pad[len(table):]
        tables = (torch.frombuffer(array.array("i", flat), dtype=torch.int32).view(b, width) if b
                  else torch.zeros(0, 1, dtype=torch.int32))
    else:
        slots = [PAD_SLOT] * b
        tables = torch.zeros(b, 1, dtype=torch.int32)
    rows = array.array("q", last)  # the four int64 inputs: rows of one tensor
    rows.extend(starts)
    rows.extend(slots)
    rows.extend([i + 1 for i in starts])
    ids, positions, slot_mapping, lens = (torch.frombuffer(rows, dtype=torch.long).view(4, b) if b
                                          else torch.zeros(4, 0, dtype=torch.long)).to(device).unbind(0)
    return BatchInput(is_prefill=False, seq_ids=[s.seq_id for s in seqs], input_ids=ids, positions=positions,
                      slot_mapping=slot_mapping, block_tables=tables.to(device), context_lens=lens,
                      query_lens=[1] * b)


def _refuse_decode_rows(block_lists: list[list[int]], starts: list[int], block_size: int, width: int) -> None:
    """Raise the ValueError of the first decode row whose token (index starts[row]) has no physical block."""
    for row, (table, index) in enumerate(zip(block_lists, starts)):
        logical_block_id = index // block_size
        if logical_block_id >= width:
            raise ValueError(f"a token's logical block is beyond the block tables' width {width}")
        if logical_block_id >= len(table) or table[logical_block_id] < 0:
            raise ValueError(f"token {index} of batch row {row} maps to a -1 entry of its block table (no "
                             "physical block)")
    raise AssertionError("no decode row lacks its physical block")


class PagedBackend:
    """Attention over the paged pool: write this step's K/V at their slots, then read history through tables.

    The write, and a decode step's order of write and read, go through `hook` (paged/faults.py; default: no fault).
    """

    def __init__(self, pool: KVCachePool, batch: BatchInput, impl: str = "gather",
                 hook: FaultHook | None = None) -> None:
        self.pool, self.batch, self.impl = pool, batch, impl
        self.hook = hook or FaultHook(pool.block_size, pool.num_slots)
        self.lens = batch.context_lens.tolist()
        # A chunked-prefill step: sequences fed one token (its decodes) share one batched decode call; the others
        # (prompt chunks) go through causal attention one by one. (Faults need whole-prompt prefill: never here.)
        one = [i for i, n in enumerate(batch.query_lens) if n == 1] if batch.chunked else []
        self.single = one if batch.is_prefill and one else None
        self.multi = [i for i in range(len(self.lens)) if self.single is None or batch.query_lens[i] != 1]
        self.native_step: DecodeStep | None = None  # impl "native", decode: made by the step's first layer

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q [N, num_heads, head_dim]; k, v [N, num_kv_heads, head_dim] -> [N, num_heads, head_dim]"""
        key_cache, value_cache = self.pool.layer(layer)

        def write() -> None:
            self.hook.write(key_cache, value_cache, k, v, self.batch.slot_mapping)

        if not self.batch.is_prefill:
            return self.hook.decode(write, lambda: self._decode(layer, q, key_cache, value_cache))
        write()
        # Prefill: read every sequence's whole context back through its block table, one gather for the batch
        # (slots as slot_mapping gives them), then causal attention per sequence: attention_sdpa, the fast path of
        # the reference `attention` (one torch SDPA call). The contiguous twin keeps the reference itself, so the
        # twins check one another.
        if self.single is None:
            return torch.cat(self._causal(q, key_cache, value_cache))
        out = torch.empty_like(q)
        rows, seqs = self.single_index
        out[rows] = paged_attention_decode(q[rows], key_cache, value_cache, self.batch.block_tables[seqs],
                                           self.batch.context_lens[seqs], impl=self.impl, validate=False)
        for i, piece in zip(self.multi, self._causal(q, key_cache, value_cache)):
            out[self.batch.starts[i]:self.batch.starts[i] + self.batch.query_lens[i]] = piece
        return out

    def _decode(self, layer: int, q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> torch.Tensor:
        """One layer's decode read through the block tables: q [B, num_heads, head_dim] -> the same shape."""
        if self.impl != "native":
            return paged_attention_decode(q, key_cache, value_cache, self.batch.block_tables,
                                          self.batch.context_lens, impl=self.impl, validate=False)
        # Every layer of a step reads through the same tables and lens, so the C kernel's checks and work plan
        # are made once per step (DecodeStep); per layer it is handed only that layer's pool and queries.
        if self.native_step is None:
            self.native_step = DecodeStep(q, self.pool.key_cache, self.pool.value_cache, self.batch.block_tables,
                                          self.batch.context_lens, check_scale(None, q.shape[-1]))
        return self.native_step(layer, q)

    def _causal(self, q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> list[torch.Tensor]:
        """Causal attention of each sequence in self.multi over its whole context (one gather for all of them)."""
        if not self.multi:
            return []
        flat = (-1, *key_cache.shape[2:])  # the pool as [num_slots, num_kv_heads, head_dim]
        slots = self.context_slots
        keys, values = key_cache.reshape(flat)[slots], value_cache.reshape(flat)[slots]
        out, at = [], 0
        for i in self.multi:
            start, n, ctx = self.batch.starts[i], self.batch.query_lens[i], self.lens[i]
            out.append(attention_sdpa(q[start:start + n], keys[at:at + ctx], values[at:at + ctx], causal=True))
            at += ctx
        return out

    @cached_property
    def single_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(token rows [S], batch rows [S]) of the sequences fed one token (once per step)."""
        device = self.batch.input_ids.device
        return (torch.tensor([self.batch.starts[i] for i in self.single], device=device),
                torch.tensor(self.single, device=device))

    @cached_property
    def context_slots(self) -> torch.Tensor:
        """[sum of context_lens over self.multi] int64: the slots of tokens 0 … context_len - 1 of each sequence in
        self.multi, back to back (the same for every layer, so computed once per step)."""
        pick = torch.tensor(self.multi, dtype=torch.long)
        lens = self.batch.context_lens.cpu()[pick]
        rows = pick.repeat_interleave(lens)
        token_index = torch.arange(int(lens.sum())) - (torch.cumsum(lens, 0) - lens).repeat_interleave(lens)
        slots = batch_slot_mapping(self.batch.block_tables.cpu(), rows, token_index, self.pool.block_size)
        return slots.to(self.pool.key_cache.device)


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
        self.hook = fault_hook(fault, block_size, num_blocks * block_size)  # the identity without a fault
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
        """Model inputs for `seqs`; num_tokens: tokens fed per sequence (chunked prefill), default all uncached.

        The paged inputs pass through the fault hook: without a fault it checks each block table against the pool
        (ValueError naming the rule); a fault rebuilds the links it breaks and checks nothing, so its symptom shows.
        """
        batch = prepare_inputs(seqs, self.block_size, is_prefill, self.device, paged=self.pool is not None,
                               num_tokens=num_tokens)
        if self.pool is not None:
            batch = self.hook.apply(batch, [s.block_table for s in seqs], self.num_blocks)
        return batch

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], batch: BatchInput) -> torch.Tensor:
        """Run the model; returns the logits of each sequence's last fed token: [B, vocab]."""
        if self.pool is not None:
            backend = PagedBackend(self.pool, batch, self.attn_impl, self.hook)
        else:
            backend = ContiguousBackend([self._contiguous_cache(s) for s in seqs], batch)
        last = None  # decode feeds one token per sequence: every row is a last token
        if batch.is_prefill:
            last = torch.tensor([s + n - 1 for s, n in zip(batch.starts, batch.query_lens)], device=self.device)
        return self.model(batch.input_ids, batch.positions, backend=backend, rows=last).float()  # [B, vocab]
