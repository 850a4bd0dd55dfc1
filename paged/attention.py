"""Gather-then-attend: PagedAttention's teaching kernel.

PagedAttention does not change attention's math, only where K and V come from. So the teaching kernel first
gathers a sequence's K/V through its block table into a contiguous tensor, then runs plain attention. Every result
here is checked (in tests) against the same attention over a contiguous KV cache holding the same data.

Shapes (one layer):
    key_cache, value_cache  [num_blocks, block_size, num_kv_heads, head_dim]
    block_table             [max_blocks] (one sequence) / block_tables [B, max_blocks], -1 padded
    query (decode)          [B, num_heads, head_dim]
"""

from __future__ import annotations

import math
import threading
from typing import Callable

import torch
import torch.nn.functional as F

from .addressing import blocks_needed, pad_block_tables, slot_mapping, validate_block_table
from .attention_checks import check_attention_inputs, check_cache, check_decode_inputs, check_scale
from .checks import as_int


# ----------------------------------------------------------------------------------------------------------------
# Gather: logical K/V out of the paged pool
# ----------------------------------------------------------------------------------------------------------------
def tolerance(dtype: torch.dtype) -> float:
    """Relative error a paged result may show against the contiguous reference in this dtype (fp32/fp64: 1e-5,
    half precisions: 1e-2): one number for the pages, the tests and the GPU check."""
    return 1e-5 if dtype in (torch.float32, torch.float64) else 1e-2


def gather_kv_loop(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
                   context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teaching loop, one token at a time, exactly the address chain.

    Returns keys, values [context_len, num_kv_heads, head_dim] in logical token order.
    """
    block_size = key_cache.shape[1]
    keys, values = [], []
    for token_index in range(context_len):
        logical_block_id = token_index // block_size
        block_offset = token_index % block_size
        physical_block_id = int(block_table[logical_block_id])
        keys.append(key_cache[physical_block_id, block_offset])
        values.append(value_cache[physical_block_id, block_offset])
    return torch.stack(keys), torch.stack(values)


def gather_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table,
              context_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Same result as `gather_kv_loop`, with no Python loop over tokens: compute every token's slot at once and
    index the pool viewed as [num_slots, num_kv_heads, head_dim].

    Raises ValueError unless the caches are [num_blocks, block_size, num_kv_heads, head_dim] (sizes >= 1),
    context_len is an integer >= 1 and the table's first ceil(context_len / block_size) entries are integers in
    [0, num_blocks). A block may appear twice (the bug lab reads aliased tables on purpose)."""
    check_cache(key_cache, value_cache)
    block_size = key_cache.shape[1]
    context_len = as_int(context_len, "context_len", 1)
    validate_block_table(block_table, key_cache.shape[0], block_size, context_len, distinct=False)
    slots = slot_mapping(block_table, 0, context_len, block_size, device=key_cache.device)
    flat_k = key_cache.reshape(-1, *key_cache.shape[2:])
    flat_v = value_cache.reshape(-1, *value_cache.shape[2:])
    return flat_k.index_select(0, slots), flat_v.index_select(0, slots)


# ----------------------------------------------------------------------------------------------------------------
# Plain attention (the math PagedAttention leaves unchanged)
# ----------------------------------------------------------------------------------------------------------------
def causal_mask(q_len: int, context_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """bool [q_len, context_len], True where a query may see a key: the causal mask aligned to the end of the
    context. The q_len queries are the context's last tokens (a prompt chunk after cached ones, or a whole prompt),
    so query i is token context_len - q_len + i and sees keys 0 … context_len - q_len + i. The library's one
    definition of it (attention, attention_sdpa). Raises ValueError unless 0 <= q_len <= context_len (integers)."""
    q_len, context_len = as_int(q_len, "q_len", 0), as_int(context_len, "context_len", 0)
    if q_len > context_len:
        raise ValueError(f"q_len ({q_len}) cannot exceed context_len ({context_len})")
    return (torch.arange(context_len, device=device)[None, :]
            <= torch.arange(q_len, device=device)[:, None] + (context_len - q_len))


def attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None,
              causal: bool = False) -> torch.Tensor:
    """softmax(Q·Kᵀ·scale)·V per head, with grouped-query attention.

    query: decode [num_heads, head_dim] or prefill [q_len, num_heads, head_dim]
    keys, values: [context_len, num_kv_heads, head_dim]
    Query head h reads kv head h // (num_heads // num_kv_heads). With causal=True the mask is aligned to the end
    of the context: query i sees keys 0 … context_len - q_len + i. Computed in float32 (float64 stays float64),
    returned in the query's dtype.
    Raises ValueError for other shapes, a size of 0 (context_len, heads, head_dim), num_heads not a multiple of
    num_kv_heads, non-floating dtypes, tensors on different devices, or a scale that is not finite and > 0.
    """
    check_attention_inputs(query, keys, values)
    decode = query.dim() == 2
    q = query.unsqueeze(0) if decode else query  # [q_len, num_heads, head_dim]
    q_len, num_heads, head_dim = q.shape
    context_len, num_kv_heads = keys.shape[0], keys.shape[1]
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    scale = check_scale(scale, head_dim)
    group = num_heads // num_kv_heads
    k = keys.to(compute).repeat_interleave(group, dim=1)  # [context_len, num_heads, head_dim]
    v = values.to(compute).repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.to(compute), k) * scale  # [num_heads, q_len, context_len]
    if causal:
        scores = scores.masked_fill(~causal_mask(q_len, context_len, q.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("hqk,khd->qhd", weights, v).to(query.dtype)
    return out[0] if decode else out


def attention_sdpa(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None,
                   causal: bool = False) -> torch.Tensor:
    """`attention` in one torch SDPA call: the same math, inputs, shapes, dtypes and ValueErrors, the fast path the
    paged prefill takes (about 2-3x the reference's speed per sequence on CPU). The mask, when causal, is
    `causal_mask`, or SDPA's own is_causal when q_len == context_len (the same mask there, and its faster kernel);
    grouped heads go to SDPA's enable_gqa (query head h reads kv head h // (num_heads // num_kv_heads)).
    `attention` stays the reference: the contiguous twin runs it, so the twins check this one."""
    check_attention_inputs(query, keys, values)
    decode = query.dim() == 2
    q = query.unsqueeze(0) if decode else query  # [q_len, num_heads, head_dim]
    q_len, context_len = q.shape[0], keys.shape[0]
    scale = check_scale(scale, q.shape[2])
    square = causal and q_len == context_len  # the whole context fed: is_causal is that mask (~20 µs less)
    mask = causal_mask(q_len, context_len, q.device) if causal and not square else None  # raises as the reference
    if q_len == 0:  # nothing to attend: an empty result, as the reference gives
        return query.new_empty(query.shape)
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    # [1, heads, tokens, head_dim]: with a batch dimension torch takes its fused CPU kernel (2-3x faster here)
    out = F.scaled_dot_product_attention(*(x.to(compute).transpose(0, 1)[None] for x in (q, keys, values)),
                                         attn_mask=mask, is_causal=square, scale=scale, enable_gqa=True)
    out = out[0].transpose(0, 1).to(query.dtype)
    return out[0] if decode else out


def attention_weights(query: torch.Tensor, keys: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Decode attention weights [num_heads, context_len] (for figures), same GQA rule as `attention`.
    query [num_heads, head_dim]; keys [context_len, num_kv_heads, head_dim]. Raises ValueError as `attention`."""
    check_attention_inputs(query, keys, keys)
    if query.dim() != 2:
        raise ValueError(f"query must be [num_heads, head_dim] (one decode step), got {tuple(query.shape)}")
    num_heads, head_dim = query.shape
    group = num_heads // keys.shape[1]
    scale = check_scale(scale, head_dim)
    k = keys.float().repeat_interleave(group, dim=1)
    return torch.softmax(torch.einsum("hd,khd->hk", query.float(), k) * scale, dim=-1)


# ----------------------------------------------------------------------------------------------------------------
# Batched decode over the paged pool
# ----------------------------------------------------------------------------------------------------------------
def contiguous_attention_decode(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, context_lens,
                                scale: float | None = None) -> torch.Tensor:
    """The reference: decode attention over contiguous K/V [B, max_ctx, num_kv_heads, head_dim], sequence b using
    its first context_lens[b] tokens. Returns [B, num_heads, head_dim]."""
    lens = [int(n) for n in torch.as_tensor(context_lens).reshape(-1).tolist()]
    return torch.stack([attention(query[b], keys[b, :n], values[b, :n], scale) for b, n in enumerate(lens)])


def _decode_loop(query, key_cache, value_cache, block_tables, context_lens, scale):
    """impl="loop": the seed's per-token loop for each sequence, then plain attention."""
    tables, lens = block_tables.tolist(), context_lens.tolist()
    out = [attention(query[b], *gather_kv_loop(key_cache, value_cache, tables[b], lens[b]), scale)
           for b in range(query.shape[0])]
    return torch.stack(out)


class Workspace(threading.local):
    """Per-thread reusable buffers, by name (the gather's K/V here, the fused kernel's tiles): a large fresh buffer
    each call spends most of its time in page faults. The one workspace cache of the library."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, shape: int | tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A buffer of `shape` (contents undefined), grown when a call needs more than the last one."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        numel = math.prod(shape)
        # Tensors made under inference_mode cannot be written outside it (and vice versa): keep them apart.
        key = (name, dtype, device, torch.is_inference_mode_enabled())
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=device)
            self.buffers[key] = buf
        return buf[:numel].view(shape)


workspace = Workspace()


def gather_batch(key_cache, value_cache, block_tables, context_lens, max_ctx: int | None = None):
    """Vectorised gather for a whole batch, a whole block at a time: K/V [B, max_ctx, num_kv_heads, head_dim] and
    the validity mask [B, max_ctx]. Rows past a sequence's context_len hold other data (block 0, or the rest of
    its last block) and must be masked. Buffers are reused (views into a per-thread workspace)."""
    batch, width = block_tables.shape
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    max_ctx = int(context_lens.max()) if max_ctx is None else max_ctx
    device = key_cache.device
    used = blocks_needed(max_ctx, block_size)  # logical blocks read per sequence
    tables = block_tables.long()
    if used > width:  # a context_len past its table (only without validation): re-read the table's last entry
        tables = torch.cat([tables, tables[:, -1:].expand(batch, used - width)], dim=1)
    # Entries past a sequence's own last block are padding (-1 or stale ids): read block 0 there, masked anyway.
    in_use = torch.arange(used, device=device)[None, :] * block_size < context_lens[:, None]  # [B, used]
    block_ids = torch.where(in_use, tables[:, :used], 0).reshape(-1)  # [B * used]
    row = block_size * num_kv_heads * head_dim  # one physical block, flattened
    out_k = workspace.get("gather_k", (batch * used, row), key_cache.dtype, device)
    out_v = workspace.get("gather_v", (batch * used, row), key_cache.dtype, device)
    torch.index_select(key_cache.reshape(num_blocks, row), 0, block_ids, out=out_k)
    torch.index_select(value_cache.reshape(num_blocks, row), 0, block_ids, out=out_v)
    shape = (batch, used * block_size, num_kv_heads, head_dim)
    valid = torch.arange(max_ctx, device=device)[None, :] < context_lens[:, None]  # [B, max_ctx]
    return out_k.view(shape)[:, :max_ctx], out_v.view(shape)[:, :max_ctx], valid


def _decode_gather(query, key_cache, value_cache, block_tables, context_lens, scale):
    """impl="gather": one vectorised gather for the whole batch, then masked SDPA (no Python loop)."""
    keys, values, valid = gather_batch(key_cache, value_cache, block_tables, context_lens)
    q = query.unsqueeze(2)  # [B, num_heads, 1, head_dim]
    full = bool(valid.all())  # every sequence as long as the longest: no mask needed (SDPA's faster path)
    out = F.scaled_dot_product_attention(q, keys.transpose(1, 2), values.transpose(1, 2),
                                         attn_mask=None if full else valid[:, None, None, :], scale=scale,
                                         enable_gqa=query.shape[1] != key_cache.shape[2])
    return out.squeeze(2)


DecodeImpl = Callable[..., torch.Tensor]
DECODE_IMPLS: dict[str, DecodeImpl] = {"loop": _decode_loop, "gather": _decode_gather}


def register_decode_impl(name: str, fn: DecodeImpl) -> None:
    """Add a faster kernel behind `paged_attention_decode(impl=name)` (same signature as the built-ins)."""
    DECODE_IMPLS[name] = fn


def default_attn_impl(device: torch.device) -> str:
    """The fastest correct decode impl for the device at this project's model sizes (LLMEngine's default).

    CUDA: the Triton kernel when triton is importable. CPU: the C kernel "native" when it can be built (a C compiler
    is present), else "gather". Measured with `python -m paged.bench engine` on the shipped model (head_dim 32, 2 kv
    heads, contexts < 300, 1 thread) on 2026-11-29, before the SDPA prefill, record=False and the 2026-12-01 kernel
    thread and prefetch rules (README's engine table has newer totals): native gave paged/contiguous 1.04x / 2.07x /
    3.62x at batch 1 / 8 / 32 where gather gave 0.95x / 2.06x / 2.94x. "fused" trails both at these sizes: its
    per-tile op dispatch only pays off on long contexts (see `python -m paged.bench kernels`).
    """
    from . import kernels  # noqa: F401  (registers "fused", "native" and "triton")
    from .kernels import native_available, triton_available

    if device.type == "cuda":
        return "triton" if triton_available() else "gather"
    return "native" if native_available() else "gather"


def paged_attention_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables,
                           context_lens, scale: float | None = None, impl: str = "gather",
                           validate: bool = True) -> torch.Tensor:
    """Decode attention for a batch, reading each sequence's history through its block table.

    query [B, num_heads, head_dim]; key_cache/value_cache [num_blocks, block_size, num_kv_heads, head_dim];
    block_tables int [B, max_blocks] padded with -1 (or a list of lists); context_lens int [B], each >= 1.
    Returns [B, num_heads, head_dim] in the query's dtype; an empty batch (B = 0) gives an empty result from every
    impl. impl: "loop" (the seed's per-token loop), "gather" (vectorised), or a kernel registered by paged.kernels.
    Raises ValueError for an unknown impl, a scale that is not finite and > 0, and (validate=True) every rule of
    `check_decode_inputs`. validate=False skips those checks (benchmarks, the bug lab); entries past a sequence's
    context are never read either way.
    """
    if not isinstance(impl, str):
        raise ValueError(f"impl must be a string naming a decode impl, got {impl!r}")
    if impl not in DECODE_IMPLS:
        from . import kernels  # noqa: F401  (registers the faster impls)
    if impl not in DECODE_IMPLS:
        raise ValueError(f"unknown impl {impl!r}; choose one of {sorted(DECODE_IMPLS)}")
    if validate:
        block_tables, context_lens = check_decode_inputs(query, key_cache, value_cache, block_tables, context_lens)
    else:  # the engine's inner calls: tensors already in place, so each conversion only when needed
        # (each attribute read below costs 0.1-0.2 us, on calls whose kernel may take 20 us: read each once)
        device = key_cache.device
        if not isinstance(block_tables, torch.Tensor):
            block_tables = pad_block_tables(block_tables)
        if block_tables.device != device:
            block_tables = block_tables.to(device)
        if (not isinstance(context_lens, torch.Tensor) or context_lens.dtype != torch.long
                or context_lens.device != device):
            context_lens = torch.as_tensor(context_lens, device=device).long()
    shape = query.shape
    scale = check_scale(scale, shape[-1])
    if shape[0] == 0:  # nothing to attend: the same empty answer whichever impl was asked for
        return query.new_empty(shape)
    out = DECODE_IMPLS[impl](query, key_cache, value_cache, block_tables, context_lens, scale)
    return out if out.dtype == query.dtype else out.to(query.dtype)
