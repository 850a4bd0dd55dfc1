"""Step-by-step state for the teaching pages: the seed example, and one sequence's gather-then-attend.

Pure (no streamlit): a page builds a `GatherConfig`, asks for a `GatherLesson` (random K/V written through
slot_mapping into scattered blocks, plus the contiguous twin) and reads from it which tokens the teaching loop has
gathered after `step` reads, and the attention result once the gather is complete. Everything is seeded, so the same
config and step always give the same picture (a shared link reproduces it).

Names: each page's one object is `<Page>Lesson` (GatherLesson, BatchLesson, EngineLesson), kept in
st.session_state["<page>.lesson"]; the page, its lessons/ module, its strings and its URL keys share the page's name.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from paged.addressing import Address, address_table, blocks_needed, slot_mapping
from paged.attention import attention, attention_weights, causal_mask, gather_kv, gather_kv_loop, tolerance
from paged.checks import as_int
from paged.kv_cache import ContiguousKVCache, KVCachePool, write_kv
from .address import dtype_of

MAX_POOL_BLOCKS = 64  # the gather page's pool never exceeds this many blocks


@dataclass(frozen=True)
class GatherConfig:
    """One sequence on one layer. mode "decode": one query over the context; "prefill": the last q_len tokens
    of the context are queries (q_len = context_len is a whole prompt), under the causal mask."""

    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 8
    context_len: int = 10
    block_size: int = 4
    dtype: str = "float32"
    seed: int = 0
    mode: str = "decode"
    q_len: int = 10

    def validate(self) -> None:
        """ValueError naming the broken rule."""
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                             f"({self.num_kv_heads})")
        dtype_of(self.dtype)
        if self.mode not in ("decode", "prefill"):
            raise ValueError(f"mode must be 'decode' or 'prefill', got {self.mode!r}")
        if not 1 <= self.q_len <= self.context_len and self.mode == "prefill":
            raise ValueError(f"q_len must be in [1, context_len={self.context_len}], got {self.q_len}")
        needed = blocks_needed(self.context_len, self.block_size)
        if needed > MAX_POOL_BLOCKS:
            raise ValueError(f"context_len {self.context_len} with block_size {self.block_size} needs {needed} "
                             f"blocks, more than the pool's {MAX_POOL_BLOCKS}")

    @property
    def num_blocks(self) -> int:
        """Pool size: the blocks the sequence needs plus about as many again, so its blocks are scattered."""
        needed = blocks_needed(self.context_len, self.block_size)
        return min(MAX_POOL_BLOCKS, max(12, needed + math.ceil(needed / 2) + 2))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class AttendResult:
    """Paged (gather-then-attend) vs the contiguous reference for the scene's query/queries."""

    paged: torch.Tensor         # decode [num_heads, head_dim]; prefill [q_len, num_heads, head_dim] (cpu)
    reference: torch.Tensor     # same shape, float64, from the contiguous cache
    weights: torch.Tensor       # decode [num_heads, context_len]; prefill [num_heads, q_len, context_len] (cpu)
    max_abs_err: float
    rel_err: float
    tolerance: float
    bitwise_equal: bool         # paged == the same-dtype attention over the contiguous cache, bit for bit
    future_weight: float        # prefill: the largest weight any query would put on future tokens without the mask

    @property
    def ok(self) -> bool:
        return self.rel_err < self.tolerance


class GatherLesson:
    """Random K/V of one sequence written into a scattered block table of a pool, and its contiguous twin."""

    def __init__(self, config: GatherConfig, device: torch.device | str | None = None) -> None:
        config.validate()
        self.config = config
        dtype = dtype_of(config.dtype)
        gen = torch.Generator().manual_seed(config.seed)
        needed = blocks_needed(config.context_len, config.block_size)
        self.block_table: list[int] = torch.randperm(config.num_blocks, generator=gen)[:needed].tolist()
        self.pool = KVCachePool(1, config.num_blocks, config.block_size, config.num_kv_heads, config.head_dim,
                                dtype, device)
        device = self.pool.device
        shape = (config.context_len, config.num_kv_heads, config.head_dim)
        keys = torch.randn(shape, generator=gen).to(device, dtype)
        values = torch.randn(shape, generator=gen).to(device, dtype)
        slots = slot_mapping(self.block_table, 0, config.context_len, config.block_size, device=device)
        write_kv(*self.pool.layer(0), keys, values, slots)
        self.contiguous = ContiguousKVCache(1, config.num_kv_heads, config.head_dim, dtype, device)
        self.contiguous.update(0, torch.arange(config.context_len), keys, values)
        q_shape = ((config.num_heads, config.head_dim) if config.mode == "decode"
                   else (config.q_len, config.num_heads, config.head_dim))
        self.query = torch.randn(q_shape, generator=gen).to(device, dtype)
        self.addresses: list[Address] = address_table(self.block_table, config.context_len, config.block_size)
        self._result: AttendResult | None = None

    def mask_rows(self, rows: int) -> list[list[bool]]:
        """The causal mask's last `rows` query rows [rows][context_len] (prefill), from the library's one
        definition (`paged.attention.causal_mask`): True where the query sees the key. Raises ValueError unless
        0 <= rows <= q_len (an integer)."""
        cfg = self.config
        rows = as_int(rows, "rows", 0, cfg.q_len)
        return causal_mask(cfg.q_len, cfg.context_len)[cfg.q_len - rows:].tolist()

    def read_slots(self, step: int) -> list[int]:
        """Slots the teaching loop has read after `step` iterations, in order."""
        return [a.slot for a in self.addresses[:max(0, step)]]

    def gathered(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The loop's keys, values after `step` reads: [step, num_kv_heads, head_dim] each."""
        step = max(0, min(step, self.config.context_len))
        if step == 0:
            empty = self.pool.key_cache.new_zeros((0, self.config.num_kv_heads, self.config.head_dim))
            return empty, empty
        return gather_kv_loop(*self.pool.layer(0), self.block_table, step)

    def result(self) -> AttendResult:
        """Gather all, attend, compare with the contiguous cache (computed once per scene)."""
        if self._result is None:
            self._result = self._attend()
        return self._result

    def _attend(self) -> AttendResult:
        cfg = self.config
        causal = cfg.mode == "prefill"
        keys, values = gather_kv(*self.pool.layer(0), self.block_table, cfg.context_len)
        paged = attention(self.query, keys, values, causal=causal)
        ref_k, ref_v = self.contiguous.get(0)
        same = attention(self.query, ref_k, ref_v, causal=causal)
        reference = attention(self.query.double(), ref_k.double(), ref_v.double(), causal=causal)
        err = (paged.double() - reference).abs().max().item()
        rel = err / max(reference.abs().max().item(), 1e-12)
        weights, future = self._weights(keys)
        return AttendResult(paged.cpu(), reference.cpu(), weights.cpu(), err, rel, tolerance(self.pool.dtype),
                            bool(torch.equal(paged, same)), future)

    def _weights(self, keys: torch.Tensor) -> tuple[torch.Tensor, float]:
        """The attention weights the page draws, from `paged.attention.attention_weights` (the library's scores and
        GQA rule), and in prefill the largest weight any query would put on future tokens without the mask.
        Prefill query i sees keys 0 … context_len - q_len + i (`attention`'s causal rule): its weights are the
        decode weights over that prefix, zero after it. Returns decode [num_heads, context_len] or prefill
        [num_heads, q_len, context_len] (float32), and the leak."""
        cfg = self.config
        if cfg.mode == "decode":
            return attention_weights(self.query, keys), 0.0
        start = cfg.context_len - cfg.q_len
        weights = keys.new_zeros((cfg.num_heads, cfg.q_len, cfg.context_len), dtype=torch.float32)
        future = 0.0
        for i, q in enumerate(self.query):
            seen = start + i + 1
            weights[:, i, :seen] = attention_weights(q, keys[:seen])
            if seen < cfg.context_len:  # the same row with no mask: what it would give the future
                future = max(future, attention_weights(q, keys)[:, seen:].sum(-1).max().item())
        return weights, future

    def trace(self, step: int) -> dict:
        """The page's export (gather_trace.json): what it shows after `step` reads, JSON-ready. "trace" here is the
        export's old name, not a StepTrace (no engine runs on this page)."""
        step = max(0, min(step, self.config.context_len))
        out = {"config": self.config.to_dict(), "num_blocks": self.config.num_blocks,
               "block_table": self.block_table, "step": step,
               "reads": [{"token_index": a.token_index, "logical_block_id": a.logical_block_id,
                          "physical_block_id": a.physical_block_id, "block_offset": a.block_offset, "slot": a.slot}
                         for a in self.addresses[:step]]}
        if step == self.config.context_len:
            r = self.result()
            out["check"] = {"max_abs_err": r.max_abs_err, "rel_err": r.rel_err, "tolerance": r.tolerance,
                            "ok": r.ok, "bitwise_equal_to_contiguous": r.bitwise_equal}
        return out
