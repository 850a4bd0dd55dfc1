"""Where a wrong tensor differs, and which known wrong variant it is: the attention exercise's
first differing (query row, head, dim), max |diff| and a named variant (repeat for
repeat_interleave, the scale, the causal mask); a gather through a pool flattened offset-major.
"""

from __future__ import annotations

import math

import torch

from paged.attention import causal_mask

from .links import Failure, close, short

# variant -> (English, Chinese): what the learner's attention equals, and the rule it breaks
VARIANTS = {
    "repeat": (
        "head h must read kv head h // (num_heads // num_kv_heads): repeat_interleave, not repeat",
        "query head h 应读 kv head h // (num_heads // num_kv_heads)：用 repeat_interleave，"
        "不是 repeat",
    ),
    "no_scale": (
        "it equals attention with no scale: multiply Q·Kᵀ by scale (default 1/sqrt(head_dim))",
        "它等于不乘 scale 的 attention：Q·Kᵀ 要乘 scale（默认 1/sqrt(head_dim)）",
    ),
    "sqrt": (
        "it equals attention scaled by sqrt(head_dim): the default scale is 1/sqrt(head_dim)",
        "它等于乘 sqrt(head_dim) 的 attention：默认 scale 是 1/sqrt(head_dim)",
    ),
    "default_scale": (
        "it equals attention with the default scale: a given scale must be used",
        "它等于用默认 scale 的 attention：给了 scale 就要用它",
    ),
    "no_mask": (
        "it equals attention with no causal mask: with causal, query i must not see later keys",
        "它等于没有 causal mask 的 attention：causal 时 query i 不能看到后面的 key",
    ),
    "top_left": (
        "it equals attention with the mask aligned to key 0: query i of q_len sees keys "
        "0 .. context_len - q_len + i (causal_mask)",
        "它等于 mask 对齐到 key 0 的 attention：q_len 个 query 中的第 i 个看 key "
        "0 .. context_len - q_len + i（causal_mask）",
    ),
}


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: list[int], scale: float, mask
) -> torch.Tensor:
    """softmax(Q·Kᵀ·scale)·V with query head h reading kv head heads[h]: q [q_len, H, D], k, v
    [ctx, KV, D], mask bool [q_len, ctx] (True: may look) or None -> [q_len, H, D].
    Raises: nothing."""
    k, v = k.double()[:, heads], v.double()[:, heads]
    scores = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)


def _variant(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None,
    causal: bool,
    got3: torch.Tensor,
) -> str | None:
    """The first known wrong variant (VARIANTS) that the learner's got3 [q_len, H, D] equals, for
    q [q_len, H, D], k, v [ctx, KV, D]; None when it equals none.
    Raises: ValueError from causal_mask when causal and q_len > ctx."""
    q_len, num_heads, head_dim = q.shape
    ctx, kv = k.shape[0], k.shape[1]
    group = num_heads // kv
    right = [h // group for h in range(num_heads)]
    default = head_dim**-0.5
    s = default if scale is None else scale
    mask = causal_mask(q_len, ctx) if causal else None
    tries = [
        ("repeat", [h % kv for h in range(num_heads)], s, mask),
        ("no_scale", right, 1.0, mask),
        ("sqrt", right, math.sqrt(head_dim), mask),
        ("default_scale", right, default, mask),
    ]
    if causal and q_len <= ctx:
        # query i sees keys 0 .. i: the square mask, then no key past q_len
        top_left = torch.cat(
            [causal_mask(q_len, q_len), torch.zeros(q_len, ctx - q_len, dtype=torch.bool)], dim=1
        )
        tries += [("no_mask", right, s, None), ("top_left", right, s, top_left)]
    want = _attend(q, k, v, right, s, mask)
    for name, heads, sc, m in tries:
        guess = _attend(q, k, v, heads, sc, m)
        if not torch.equal(guess, want) and close(got3, guess):
            return name
    return None


def attention_failure(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None,
    causal: bool,
    want: torch.Tensor,
    got: torch.Tensor,
    shown: str,
) -> Failure:
    """The Failure for attention output `got` that differs from `want` (both shaped as q: [H, D]
    or [q_len, H, D]): the first differing (query row, head, dim), max |diff|, a named variant.
    Raises: nothing (returns the Failure to raise)."""
    q3 = q.unsqueeze(0) if q.dim() == 2 else q
    want3, got3 = (t.detach().double().reshape(q3.shape) for t in (want, got))
    diff = (got3 - want3).abs()
    tol = 1e-5 * max(1.0, float(want3.abs().max()))
    bad = ~(diff <= tol)  # NaN counts as differing
    r, h, d = (int(x) for x in bad.nonzero()[0])
    worst = float(diff.nan_to_num(float("inf")).max())
    variant = _variant(q3, k, v, scale, causal, got3)
    en, zh = VARIANTS.get(variant, ("", ""))
    return Failure(
        "attention",
        f"attention's output differs from softmax(Q·Kᵀ·scale)·V: first at query row {r}, "
        f"head {h}, dim {d}; max |diff| {worst:.4g}" + (f". {en}" if en else ""),
        f"attention 的输出与 softmax(Q·Kᵀ·scale)·V 不同：最早在 query 第 {r} 行、"
        f"head {h}、dim {d}；最大 |diff| {worst:.4g}" + (f"。{zh}" if zh else ""),
        shown,
        f"query row {r}, head {h}: {short(want3[r, h].float())}",
        f"query row {r}, head {h}: {short(got3[r, h].float())}",
    )


def offset_major(got: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor) -> bool:
    """Whether gathered rows `got` [ctx, KV, D] are the slots read from the pool
    [num_blocks, block_size, KV, D] flattened offset-major (transposed before flatten).
    Raises: nothing."""
    wrong = cache.transpose(0, 1).flatten(0, 1)
    return bool(int(slots.max()) < wrong.shape[0] and torch.equal(got, wrong[slots]))


def row_order_failure(
    name: str, what: str, t: int, slot: int, cache_shape: tuple[int, ...], shown: str
) -> Failure:
    """The Failure for a gather through an offset-major pool (offset_major); cache_shape
    [num_blocks, block_size, ...].
    Raises: nothing (returns the Failure to raise)."""
    nb, bs = cache_shape[0], cache_shape[1]
    return Failure(
        "gather",
        f"{name}: {what}[{t}] came from the pool flattened offset-major (transposed first): the "
        "flattened pool's rows must be block-major: row = block * block_size + offset",
        f"{name}：{what}[{t}] 读自按 offset 优先展平（先转置）的池："
        "展平后的池必须按 block 优先排行：row = block * block_size + offset",
        shown,
        f"row {slot} = block {slot // bs} * {bs} + offset {slot % bs}",
        f"row {slot} of the transposed pool = block {slot % nb}, offset {slot // nb}",
    )
