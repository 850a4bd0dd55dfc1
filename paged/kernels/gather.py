"""impl="gather": the reference's gather-then-attend for a whole decode batch at once, whole blocks
at a time, into reused buffers (workspace.py): a fresh [B, max_ctx, num_kv_heads, head_dim] K/V copy
per call spends most of its time in page faults. Same result as paged.attention.gather_kv +
attention per sequence (tests/paged/kernels/test_gather.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..addressing import blocks_needed
from .workspace import workspace


def gather_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                  block_tables: torch.Tensor, context_lens: torch.Tensor,
                  scale: float) -> torch.Tensor:
    """Gather whole blocks, then one masked SDPA for the batch: [B, num_heads, head_dim].

    query [B, num_heads, head_dim]; block_tables [B, max_blocks] (-1 padded); context_lens [B]
    int64 on the cache's device. One index_select into the workspace gathers every sequence's
    blocks. Unchecked (paged_attention_decode checks).
    """
    batch, max_ctx = query.shape[0], int(context_lens.max())
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    used = blocks_needed(max_ctx, block_size)  # logical blocks read per sequence
    tables = block_tables.long()
    # a context_len past its table (only unvalidated): re-read the table's last entry
    if used > tables.shape[1]:
        tables = torch.cat([tables, tables[:, -1:].expand(batch, used - tables.shape[1])], dim=1)
    # [B, used]
    in_use = torch.arange(used, device=query.device)[None, :] * block_size < context_lens[:, None]
    # past a sequence's own blocks: block 0, masked
    blocks = torch.where(in_use, tables[:, :used], 0).reshape(-1)
    row = block_size * num_kv_heads * head_dim  # one physical block, flattened
    shape = (batch, used * block_size, num_kv_heads, head_dim)
    kv = []
    for name, cache in (("gather_k", key_cache), ("gather_v", value_cache)):
        out = workspace.get(name, (batch * used, row), cache.dtype, cache.device)
        torch.index_select(cache.reshape(num_blocks, row), 0, blocks, out=out)
        # [B, num_kv_heads, max_ctx, head_dim]
        kv.append(out.view(shape)[:, :max_ctx].transpose(1, 2))
    # [B, max_ctx]
    valid = torch.arange(max_ctx, device=query.device)[None, :] < context_lens[:, None]
    out = F.scaled_dot_product_attention(query.unsqueeze(2), *kv,
                                         attn_mask=(None if bool(valid.all())
                                                    else valid[:, None, None, :]),
                                         scale=scale, enable_gqa=query.shape[1] != num_kv_heads)
    return out.squeeze(2)
