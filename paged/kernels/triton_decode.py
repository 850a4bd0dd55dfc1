"""impl="triton": a PagedAttention decode kernel in Triton, one program per (sequence, kv head).

Each program loads the queries of its GQA group (num_heads // num_kv_heads query heads that share
one kv head), then walks its sequence's block table one physical block at a time: for logical block
j it reads physical_block_id = block_table[j] and loads that block's block_size keys and values for
its kv head, straight from the pool. An online softmax (running max m, running sum l, rescaled
accumulator acc) means nothing but the current block is held. Tokens at or past context_len are
masked; head_dim and the group are padded up to powers of two (tl.arange needs them) and masked.

On a GPU this compiles to a real kernel. On a CPU it runs only under Triton's interpreter: set
TRITON_INTERPRET=1 in the environment before triton is imported (about a millisecond per program and
block: tiny sizes only). Uses nothing newer than Triton 3.6.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, tables_ptr, lens_ptr, out_ptr, scale,
    stride_qb, stride_qh,  # query [B, num_heads, head_dim], head_dim contiguous
    # caches [num_blocks, block_size, num_kv_heads, head_dim], same strides
    stride_cb, stride_ct, stride_ch,
    stride_tb,  # block_tables [B, max_blocks]
    stride_ob, stride_oh,  # out [B, num_heads, head_dim]
    GROUP: tl.constexpr, GROUP_P: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_P: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    g = tl.arange(0, GROUP_P)
    d = tl.arange(0, HEAD_P)
    t = tl.arange(0, BLOCK_SIZE)
    g_mask = g < GROUP
    d_mask = d < HEAD_DIM
    heads = kv_head * GROUP + g  # the query heads that read this kv head

    q_off = seq * stride_qb + heads[:, None] * stride_qh + d[None, :]
    q_mask = g_mask[:, None] & d_mask[None, :]
    q = tl.load(q_ptr + q_off, mask=q_mask, other=0.0).to(tl.float32) * scale  # [GROUP_P, HEAD_P]

    context_len = tl.load(lens_ptr + seq)
    m = tl.full([GROUP_P], float("-inf"), dtype=tl.float32)  # running max of the scores
    l = tl.zeros([GROUP_P], dtype=tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([GROUP_P, HEAD_P], dtype=tl.float32)  # running sum of exp(score - m) * value

    num_logical_blocks = tl.cdiv(context_len, BLOCK_SIZE)
    for logical_block_id in range(0, num_logical_blocks):
        physical_block_id = tl.load(tables_ptr + seq * stride_tb + logical_block_id).to(tl.int64)
        token = logical_block_id * BLOCK_SIZE + t
        t_mask = token < context_len
        kv_off = (physical_block_id * stride_cb + t[:, None] * stride_ct + kv_head * stride_ch
                  + d[None, :])
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_ptr + kv_off, mask=kv_mask, other=0.0).to(tl.float32)  # [BLOCK_SIZE, HEAD_P]
        v = tl.load(v_ptr + kv_off, mask=kv_mask, other=0.0).to(tl.float32)

        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # [GROUP_P, BLOCK_SIZE]
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))  # finite: block 0 always holds token 0
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)  # rescales what was summed under the old max
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new

    out = acc / l[:, None]
    out_off = seq * stride_ob + heads[:, None] * stride_oh + d[None, :]
    tl.store(out_ptr + out_off, out, mask=q_mask)


def interpreted() -> bool:
    """True when the kernel was built for Triton's CPU interpreter (TRITON_INTERPRET=1 before
    import)."""
    return type(_paged_decode_kernel).__name__ == "InterpretedFunction"


def triton_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                  block_tables: torch.Tensor, context_lens: torch.Tensor,
                  scale: float) -> torch.Tensor:
    """Paged decode with the Triton kernel; returns float32 [B, num_heads, head_dim].

    Raises: ValueError if block_size is not a power of two; RuntimeError for CPU tensors without
    the interpreter.
    """
    batch, num_heads, head_dim = query.shape
    _, block_size, num_kv_heads, _ = key_cache.shape
    if block_size & (block_size - 1):
        raise ValueError(f"impl='triton' needs block_size to be a power of two, got {block_size}; "
                         "use impl='fused' for other block sizes")
    if key_cache.device.type == "cpu" and not interpreted():
        raise RuntimeError("impl='triton' got CPU tensors but Triton is not in interpreter mode: "
                           "set TRITON_INTERPRET=1 in the environment before triton is imported, "
                           "or use a GPU")
    group = num_heads // num_kv_heads
    query, key_cache, value_cache = (query.contiguous(), key_cache.contiguous(),
                                     value_cache.contiguous())
    tables = block_tables.to(torch.int32).contiguous()
    lens = context_lens.to(device=key_cache.device, dtype=torch.int32).contiguous()
    out = torch.empty(batch, num_heads, head_dim, dtype=torch.float32, device=query.device)
    _paged_decode_kernel[(batch, num_kv_heads)](
        query, key_cache, value_cache, tables, lens, out, float(scale),
        query.stride(0), query.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),
        tables.stride(0),
        out.stride(0), out.stride(1),
        GROUP=group, GROUP_P=triton.next_power_of_2(group),
        HEAD_DIM=head_dim, HEAD_P=triton.next_power_of_2(head_dim),
        BLOCK_SIZE=block_size,
    )
    return out
