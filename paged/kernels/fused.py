"""impl="fused": paged decode attention that never builds a contiguous copy of a sequence's history.

The "gather" impl copies every sequence's whole K/V out of the pool, then attends. Here we walk the
block tables a tile at a time (a few blocks of every sequence at once) and keep an online softmax,
as FlashAttention and vLLM's PagedAttention kernels do: per query head a running max `m`, a running
sum of exponentials `l` and a rescaled accumulator `acc`. When a tile raises the max from m to m',
everything summed so far is multiplied by exp(m - m').

How K and V are read (the expensive part on a CPU, where decode attention is bound by memory
traffic):
- K: one `index_select` per tile copies whole physical blocks (block_size * num_kv_heads * head_dim
  values each) into a small reused buffer (a few MB, so it is still in cache when it is read again),
  then a kv-major copy lets one batched matmul score the tile for every query head of a kv head.
- V: `embedding_bag(mode="sum", per_sample_weights=p)` computes sum_t p_t * V[row_t] straight out of
  the pool, so V is never copied. Rows are (slot, kv head) pairs: row = slot * num_kv_heads +
  kv_head. Used for float32/64; other dtypes gather V like K and convert to float32, so every sum is
  accumulated in float32.

Shapes: query [B, num_heads, head_dim]; key_cache/value_cache [num_blocks, block_size, num_kv_heads,
head_dim]; block_tables int [B, max_blocks] (-1 padded); context_lens int64 [B]. GQA: query head h =
kv_head * group + g reads kv head h // group; the query is viewed as [B * num_kv_heads, group,
head_dim], nothing is repeated.

Why it still trails SDPA on contiguous K/V: that reads each byte once, in one op. Here each K byte
is read from memory, written to the tile, copied kv-major and read again, and every tile costs a
dozen op dispatches. impl="native" (paged/kernels/native.py) is this algorithm without those costs,
as one C loop.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..addressing import block_slots, blocks_needed
from .workspace import workspace

# K bytes gathered per tile (whole batch), per intra-op thread: on a 2-core EPYC (512 KB L2 per
# core, 32 MB L3) 2 MB was fastest with 1 thread and 4 MB with 2; 1 MB and 8-16 MB were slower.
TILE_BYTES_PER_THREAD = 2 << 20


# the library's one workspace cache (workspace.Workspace); names prefixed "fused_"
_buffers = workspace


def tile_blocks(batch: int, block_size: int, num_kv_heads: int, head_dim: int,
                itemsize: int) -> int:
    """Blocks per sequence in one tile: a batch's K tile of ~TILE_BYTES_PER_THREAD * threads."""
    budget = TILE_BYTES_PER_THREAD * torch.get_num_threads()
    return max(1, budget // (batch * block_size * num_kv_heads * head_dim * itemsize))


def fused_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                 block_tables: torch.Tensor, context_lens: torch.Tensor,
                 scale: float) -> torch.Tensor:
    """Tiled online-softmax decode over the paged pool: [B, num_heads, head_dim], float32 (float64).

    Float64 for float64 inputs. Inputs are assumed checked (paged.attention.check_decode_inputs).
    """
    batch, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    group = num_heads // num_kv_heads
    device = key_cache.device
    compute = torch.float64 if query.dtype == torch.float64 else torch.float32
    in_place_v = value_cache.dtype == compute  # embedding_bag wants weights and table in one dtype
    # no-ops for pool layers
    key_cache, value_cache = key_cache.contiguous(), value_cache.contiguous()

    lens = context_lens.tolist()
    max_len, min_len = max(lens), min(lens)
    used_blocks = blocks_needed(max_len, block_size)
    blocks_per_tile = min(used_blocks, tile_blocks(batch, block_size, num_kv_heads, head_dim,
                                                   key_cache.element_size()))
    num_tiles = -(-used_blocks // blocks_per_tile)
    tile_len = blocks_per_tile * block_size
    # Physical block ids per tile [num_tiles, B, blocks_per_tile]. Entries past a sequence's own
    # last block (-1, or stale ids that may lie outside the pool) and the padding up to whole tiles
    # become block 0: real memory to read, always masked out below.
    # [B, used]
    in_use = torch.arange(used_blocks, device=device)[None, :] * block_size < context_lens[:, None]
    tables = torch.where(in_use, block_tables[:, :used_blocks].long(), 0)
    tables = F.pad(tables, (0, num_tiles * blocks_per_tile - used_blocks))
    tiles = tables.view(batch, num_tiles, blocks_per_tile).transpose(0, 1).contiguous()
    if in_place_v:
        # V row of token t for query head h: slot(t) * num_kv_heads + kv head of h.  [num_tiles, B,
        # H, tile_len]
        slots = block_slots(tiles, block_size).view(num_tiles, batch, 1, -1)
        kv_head = torch.arange(num_heads, device=device)[:, None] // group  # [H, 1]
        rows = _buffers.get("fused_rows", (num_tiles, batch, num_heads, tile_len), torch.long,
                            device)
        torch.add(kv_head, slots, alpha=num_kv_heads, out=rows)
        bag_offsets = torch.arange(0, batch * num_heads * tile_len, tile_len, device=device)
        # [num_blocks * block_size * num_kv_heads, head_dim]
        value_rows = value_cache.view(-1, head_dim)
    token = torch.arange(tile_len, device=device)

    flat_k = key_cache.view(key_cache.shape[0], -1)  # one row per physical block
    flat_v = value_cache.view(value_cache.shape[0], -1)
    k_tile = _buffers.get("fused_k", (batch * blocks_per_tile, flat_k.shape[1]), key_cache.dtype,
                          device)
    # a permuted query cannot .view
    q = (query.to(compute) * scale).reshape(batch * num_kv_heads, group, head_dim)
    # running max
    m = torch.full((batch, num_kv_heads, group, 1), -math.inf, dtype=compute, device=device)
    l = torch.zeros_like(m)  # running sum of exp(score - m)
    # running sum of p * V
    acc = torch.zeros(batch, num_kv_heads, group, head_dim, dtype=compute, device=device)

    for n in range(num_tiles):
        blocks = tiles[n].view(-1)  # [B * blocks_per_tile]
        torch.index_select(flat_k, 0, blocks, out=k_tile)
        keys = k_tile.view(batch, tile_len, num_kv_heads, head_dim)
        # kv-major copy in the compute dtype, so one bmm per (sequence, kv head) scores all `group`
        # query rows against the tile. (A multiply-and-sum on the token-major tile measured no
        # faster, even for group 1.)
        keys_t = _buffers.get("fused_kt", (batch, num_kv_heads, tile_len, head_dim), compute,
                              device)
        keys_t.copy_(keys.transpose(1, 2))
        # [B * kv, group, T]
        scores = torch.bmm(q, keys_t.view(-1, tile_len, head_dim).transpose(1, 2))
        scores = scores.view(batch, num_kv_heads, group, tile_len)
        if (n + 1) * tile_len > min_len:  # some sequence ends inside (or before) this tile
            past_end = (token + n * tile_len) >= context_lens[:, None]  # [B, T]
            scores = scores.masked_fill(past_end[:, None, None, :], -math.inf)
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        p = torch.exp(scores - m_new)  # [B, kv, group, T]; exactly 0 where masked
        alpha = torch.exp(m - m_new)  # how much the old max overestimated: rescale old sums by it
        l = torch.addcmul(p.sum(-1, keepdim=True), l, alpha)
        if in_place_v:
            # bags in (b, h) order
            pv = F.embedding_bag(rows[n].view(-1), value_rows, bag_offsets, mode="sum",
                                 per_sample_weights=p.reshape(-1))
            pv = pv.view(batch, num_kv_heads, group, head_dim)
        else:
            v_tile = _buffers.get("fused_v", (batch * blocks_per_tile, flat_v.shape[1]),
                                  value_cache.dtype, device)
            torch.index_select(flat_v, 0, blocks, out=v_tile)
            values_t = _buffers.get("fused_vt", (batch, num_kv_heads, tile_len, head_dim), compute,
                                    device)
            values_t.copy_(v_tile.view(batch, tile_len, num_kv_heads, head_dim).transpose(1, 2))
            pv = torch.bmm(p.view(-1, group, tile_len), values_t.view(-1, tile_len, head_dim))
            pv = pv.view(acc.shape)  # [B, kv, group, head_dim]
        acc = torch.addcmul(pv, acc, alpha)
        m = m_new
    return (acc / l).view(batch, num_heads, head_dim)
