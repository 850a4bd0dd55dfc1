"""Break it where it is taught (page 2 · Gather & attend): two classic mistakes on a GatherLesson, measured against
the contiguous reference.

- `without_causal_mask(scene)`: attend with no causal mask. In prefill every query row but the last can now see
  tokens after it, so those rows change; the last row already saw everything. In decode the single query *is* the
  last position, so nothing changes: that is why decode needs no mask.
- `context_len_off(scene, delta)`: decode reads context_len + delta tokens through the block table. −1 drops the
  newest token (whose K/V was just written); +1 reads one slot past the history: a slot never written (zeros) in
  the sequence's last block, or, past the table's end, whatever the kernel's padding points to.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from paged.addressing import blocks_needed, locate
from paged.attention import attention, attention_weights, gather_kv, paged_attention_decode
from .gather import GatherLesson

OFFSETS = (0, -1, 1)  # the page's choices: exact, one too few, one too many


@dataclass
class MaskBreak:
    """No causal mask vs the masked contiguous reference, per query row."""

    positions: list[int]      # token index of each query row (decode: [context_len - 1])
    row_diff: list[float]     # max |unmasked − reference| over heads and head_dim, per row
    changed: list[bool]       # the row differs beyond the dtype's tolerance (relative to the reference's size)
    diff: torch.Tensor        # [rows, num_heads, head_dim] float64 (cpu)
    tolerance: float
    weights: torch.Tensor | None = None  # prefill: the unmasked weights [num_heads, q_len, context_len] (cpu)
    rel_err: float = 0.0      # max |Δ| over every row / max |reference|

    @property
    def changed_rows(self) -> int:
        return sum(self.changed)

    @property
    def max_abs_err(self) -> float:
        return max(self.row_diff)

    @property
    def ok(self) -> bool:
        return self.rel_err < self.tolerance


@dataclass
class LenBreak:
    """Decode with context_len + delta vs the reference over the exact context."""

    delta: int
    context_len: int          # what attention was told
    possible: bool            # False: −1 on a one-token context would read nothing at all
    slot_read: int | None     # +1: the slot the extra token came from
    holds_token: int | None   # +1: the token of this sequence whose K/V sit in that slot (None: never written)
    past_table: bool          # +1: the extra token lies past the block table's last block
    dropped_token: int | None  # −1: the token no longer read (the newest)
    head_diff: list[float]    # max |Δ| per query head
    diff: torch.Tensor | None  # [num_heads, head_dim] float64 (cpu)
    max_abs_err: float
    rel_err: float
    tolerance: float
    output: torch.Tensor | None = None   # what the broken decode returns [num_heads, head_dim] (cpu)
    weights: torch.Tensor | None = None  # its weights over the `context_len` tokens it read [num_heads, told] (cpu)

    @property
    def ok(self) -> bool:
        return self.rel_err < self.tolerance


def without_causal_mask(scene: GatherLesson) -> MaskBreak:
    """The scene's query/queries attended over the gathered K/V with causal=False, compared row by row with the
    masked float64 reference from the contiguous cache."""
    cfg = scene.config
    reference = scene.result().reference  # decode [num_heads, head_dim]; prefill [q_len, num_heads, head_dim]
    keys, values = gather_kv(*scene.pool.layer(0), scene.block_table, cfg.context_len)
    unmasked = attention(scene.query, keys, values, causal=False).cpu().double()
    if cfg.mode == "decode":
        unmasked, reference = unmasked[None], reference[None]
    diff = unmasked - reference
    row_diff = diff.abs().flatten(1).amax(1).tolist()
    size = max(reference.abs().max().item(), 1e-12)
    tol = scene.result().tolerance
    q_len = reference.shape[0]
    weights = None
    if cfg.mode == "prefill":  # every query row over every key: no mask
        weights = torch.stack([attention_weights(q, keys) for q in scene.query], dim=1).cpu()
    return MaskBreak(list(range(cfg.context_len - q_len, cfg.context_len)), row_diff,
                     [d / size > tol for d in row_diff], diff, tol, weights, max(row_diff) / size)


def context_len_off(scene: GatherLesson, delta: int) -> LenBreak:
    """Decode attention told context_len + delta (delta in OFFSETS) through the library's paged decode, without its
    checks (a real kernel has none), compared with the float64 reference over the exact context.

    Raises ValueError for a delta outside OFFSETS or a scene not in decode mode."""
    cfg = scene.config
    if delta not in OFFSETS:
        raise ValueError(f"delta must be one of {OFFSETS}, got {delta!r}")
    if cfg.mode != "decode":
        raise ValueError(f"context_len off by one is a decode mistake; the scene is in {cfg.mode!r} mode")
    n, bs, table = cfg.context_len, cfg.block_size, scene.block_table
    told = n + delta
    tol = scene.result().tolerance
    if told < 1:
        return LenBreak(delta, told, False, None, None, False, n - 1, [], None, 0.0, 0.0, tol)
    slot, holds, past = None, None, False
    if delta > 0:
        # the token index n read through the table; past the table's end this library's gather re-reads the
        # table's last entry (a CUDA kernel would read whatever the padded entry points to)
        past = blocks_needed(n + 1, bs) > len(table)
        slot = locate((len(table) - 1) * bs + n % bs if past else n, table, bs).slot  # past: the last entry again
        written = {a.slot: a.token_index for a in scene.addresses}
        holds = written.get(slot)
    out = paged_attention_decode(scene.query[None], *scene.pool.layer(0), [table], [told], validate=False)[0]
    reference = scene.result().reference
    diff = out.cpu().double() - reference
    err = diff.abs().max().item()
    rel = err / max(reference.abs().max().item(), 1e-12)
    key_cache = scene.pool.layer(0)[0]
    keys = gather_kv(key_cache, key_cache, table, min(told, n))[0]  # what the broken decode read: n - 1, or n …
    if delta > 0:  # … and the extra slot
        keys = torch.cat([keys, key_cache.flatten(0, 1)[slot][None]])
    weights = attention_weights(scene.query, keys).cpu()
    return LenBreak(delta, told, True, slot, holds, past, n - 1 if delta < 0 else None,
                    diff.abs().amax(1).tolist(), diff, err, rel, tol, out.cpu(), weights)
