"""The exercises, in the article's order, each checking the learner's functions against the library
on real tensors: `EXERCISES` maps a name to (check function, time limit in seconds). A check raises
`Failure` (links.py) at the first wrong value; it returns data for the app's pictures (or None).
Exercises 1-7 (the address chain to decode attention) are here, 8-9 (the bookkeeping) in
bookkeeping_checks.py, the engine in engine_check.py.

    locate, slot_mapping, write_kv, gather_loop, gather, attention, decode, block_manager,
    state_rule, engine

"""

from __future__ import annotations

from typing import Callable

import torch

from paged import addressing as ref_addr
from paged.attention import attention as ref_attention
from paged.kv_cache import write_kv as ref_write_kv

from .links import (
    LINKS,
    Failure,
    Workspace,
    chain_link,
    close,
    decode_diagnosis,
    decode_ref,
    expect_tensor,
    find_row,
    short,
    write_diagnosis,
)
from .bookkeeping_checks import check_block_manager, check_state_rule
from .diagnose import attention_failure, offset_major, row_order_failure

SEED_TABLE = [
    7,
    2,
    9,
]  # the article's example: block_size 4, logical blocks 0, 1, 2 in physical blocks 7, 2, 9


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- 1. locate a token ----------------------------------------------------------------------------
def check_locate(ws: Workspace) -> dict:
    """logical_address, locate (each link of the chain), then blocks_needed."""
    a = ws["addressing"]
    for bs, token in [(4, t) for t in range(12)] + [(16, 37), (1, 3)]:
        want, got = ref_addr.logical_address(token, bs), a.logical_address(token, bs)
        if (tuple(got) if isinstance(got, (tuple, list)) else got) != want:
            link = (
                "logical_block_id"
                if not isinstance(got, (tuple, list)) or got[0] != want[0]
                else "block_offset"
            )
            raise Failure(
                link,
                "logical_address gave a wrong (logical_block_id, block_offset)",
                "logical_address 算错了 (logical_block_id, block_offset)",
                f"token_index={token}, block_size={bs}",
                want,
                short(got),
            )
    cases = [(SEED_TABLE, 4, t) for t in range(12)] + [
        ([3, 11, 0], 16, 40),
        (torch.tensor([5, 1]), 4, 6),
    ]
    for table, bs, token in cases:
        want, got = ref_addr.locate(token, table, bs), a.locate(token, table, bs)
        for field, link in (
            ("logical_block_id", "logical_block_id"),
            ("physical_block_id", "physical_block_id"),
            ("block_offset", "block_offset"),
            ("slot", "slot_mapping"),
        ):
            if not hasattr(got, field):
                raise Failure(
                    None,
                    f"locate must return an Address (with .{field}), got {type(got).__name__}",
                    f"locate 应返回 Address（含 .{field}），实际是 {type(got).__name__}",
                    f"token_index={token}, block_table={short(table)}, block_size={bs}",
                    "Address",
                    short(got),
                )
            if getattr(got, field) != getattr(want, field):
                raise Failure(
                    link,
                    f"locate: {field} is wrong",
                    f"locate：{field} 不对",
                    f"token_index={token}, block_table={short(table)}, block_size={bs}",
                    getattr(want, field),
                    getattr(got, field),
                )
    for n, bs in ((0, 4), (1, 4), (4, 4), (5, 4), (11, 4), (16, 16), (17, 16)):
        if a.blocks_needed(n, bs) != ref_addr.blocks_needed(n, bs):
            raise Failure(
                "block_table",
                "blocks_needed: a wrong number of blocks",
                "blocks_needed：block 数不对",
                f"num_tokens={n}, block_size={bs}",
                ref_addr.blocks_needed(n, bs),
                a.blocks_needed(n, bs),
            )
    return {"chain": [vars(a.locate(t, SEED_TABLE, 4)) for t in range(11)]}


# --- 2. the slot mapping --------------------------------------------------------------------------
def check_slot_mapping(ws: Workspace) -> dict:
    """slot_mapping for spans of tables (a list, a tensor, an empty span), token by token."""
    cases = [
        (SEED_TABLE, 0, 11, 4),
        ([5, 0, 3, 8], 3, 14, 4),
        (torch.tensor([6, 1]), 5, 6, 4),
        ([1], 0, 0, 4),
        ([2, 9, 4], 17, 40, 16),
    ]
    for table, start, end, bs in cases:
        shown = f"block_table={short(table)}, start={start}, end={end}, block_size={bs}"
        got = ws["addressing"].slot_mapping(table, start, end, bs)
        want = ref_addr.slot_mapping(table, start, end, bs)
        got = expect_tensor(got, (end - start,), "slot_mapping", "slot_mapping", shown)
        if got.dtype.is_floating_point:
            raise Failure(
                "slot_mapping",
                "slot_mapping must hold integers (torch.long)",
                "slot_mapping 应是整数张量（torch.long）",
                shown,
                "torch.int64",
                str(got.dtype),
            )
        bad = (got.long() != want).nonzero()
        if bad.numel():
            k = int(bad[0])
            token = start + k
            ids = [int(x) for x in torch.as_tensor(table).tolist()]
            raise Failure(
                chain_link(token, ids, bs, int(got[k])),
                f"slot_mapping: token {token}'s slot is wrong",
                f"slot_mapping：token {token} 的 slot 不对",
                shown,
                want.tolist(),
                got.tolist(),
            )
    return {"slots": ws["addressing"].slot_mapping(SEED_TABLE, 0, 11, 4).tolist()}


# --- 3. the K/V write -----------------------------------------------------------------------------
POOL = dict(num_blocks=10, block_size=4, num_kv_heads=2, head_dim=8)


def check_write_kv(ws: Workspace) -> dict:
    """write_kv into zeroed caches: scattered slots, then slots with -1 padding among them."""
    p = POOL
    cases = [[28, 29, 30, 31, 8, 9, 10, 36, 37], [5, 22, 13, 0, 38], [39, 12, -1, 13, -1, -1]]
    for n, slots in enumerate(cases):
        shown = f"slot_mapping={slots}, block_size={p['block_size']}"
        key = _random(len(slots), p["num_kv_heads"], p["head_dim"], seed=10 + n)
        value = _random(len(slots), p["num_kv_heads"], p["head_dim"], seed=20 + n)
        shape = (p["num_blocks"], p["block_size"], p["num_kv_heads"], p["head_dim"])
        kc, vc, want_k, want_v = (torch.zeros(shape) for _ in range(4))
        mapping = torch.tensor(slots)
        ref_write_kv(want_k, want_v, key, value, mapping)
        ws["kv_cache"].write_kv(kc, vc, key, value, mapping.clone())
        for cache, want, rows, name in ((kc, want_k, key, "key"), (vc, want_v, value, "value")):
            if not torch.equal(cache, want):
                write_diagnosis(cache, want, rows, slots, name, shown)
    return {"written": cases[0]}


# --- 4, 5. gather ---------------------------------------------------------------------------------
def _filled_pool(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    p = POOL
    shape = (p["num_blocks"], p["block_size"], p["num_kv_heads"], p["head_dim"])
    return _random(*shape, seed=seed), _random(*shape, seed=seed + 1)


GATHER_CASES = [(SEED_TABLE, 11), ([4, 1], 8), (torch.tensor([8, 5, 3, 6]), 15), ([0], 1)]


def _check_gather(fn: Callable, name: str) -> dict:
    kc, vc = _filled_pool(seed=3)
    bs = kc.shape[1]
    for table, ctx in GATHER_CASES:
        shown = f"block_table={short(table)}, context_len={ctx}, block_size={bs}"
        ids = [int(x) for x in torch.as_tensor(table).tolist()]
        slots = ref_addr.slot_mapping(ids, 0, ctx, bs)
        out = fn(kc, vc, table, ctx)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise Failure(
                "gather",
                f"{name} must return (keys, values)",
                f"{name} 应返回 (keys, values)",
                shown,
                "(keys, values)",
                short(out),
            )
        for got, cache, what in ((out[0], kc, "keys"), (out[1], vc, "values")):
            flat = cache.flatten(0, 1)
            got = expect_tensor(got, (ctx, *cache.shape[2:]), f"{name} {what}", "gather", shown)
            for t in range(ctx):
                if torch.equal(got[t], flat[slots[t]]):
                    continue
                if offset_major(got, cache, slots):
                    raise row_order_failure(name, what, t, int(slots[t]), cache.shape, shown)
                src = find_row(flat, got[t])
                link = "gather" if src is None else chain_link(t, ids, bs, src)
                came = "a row that is in no slot" if src is None else f"slot {src}"
                raise Failure(
                    link,
                    f"{name}: {what}[{t}] came from {came}",
                    f"{name}：{what}[{t}] 读自 "
                    f"{'不属于任何 slot 的一行' if src is None else f'slot {src}'}",
                    shown,
                    f"slot {int(slots[t])}",
                    came,
                )
    return {"gathered": [int(s) for s in ref_addr.slot_mapping(SEED_TABLE, 0, 11, bs)]}


def check_gather_loop(ws: Workspace) -> dict:
    """gather_kv_loop, one token at a time."""
    return _check_gather(ws["attention"].gather_kv_loop, "gather_kv_loop")


def check_gather(ws: Workspace) -> dict:
    """gather_kv, without the loop: the same rows."""
    return _check_gather(ws["attention"].gather_kv, "gather_kv")


# --- 6. attention ---------------------------------------------------------------------------------
def check_attention(ws: Workspace) -> dict:
    """attention against the library's on random q/k/v: decode (GQA and not, a given scale), then
    causal prefill."""
    cases = [
        ((4, 8), 7, 2, None, False),
        ((4, 8), 5, 4, None, False),
        ((4, 8), 9, 2, 0.5, False),
        ((3, 4, 8), 7, 2, None, True),
        ((6, 4, 8), 6, 1, None, True),
    ]
    for n, (qshape, ctx, kv_heads, scale, causal) in enumerate(cases):
        q = _random(*qshape, seed=40 + n)
        k, v = _random(ctx, kv_heads, 8, seed=50 + n), _random(ctx, kv_heads, 8, seed=60 + n)
        shown = (
            f"query{tuple(q.shape)}, keys/values{tuple(k.shape)}, scale={scale}, causal={causal}"
        )
        want = ref_attention(q, k, v, scale=scale, causal=causal)
        got = expect_tensor(
            ws["attention"].attention(q, k, v, scale=scale, causal=causal),
            tuple(want.shape),
            "attention",
            "attention",
            shown,
        )
        if not close(got, want):
            raise attention_failure(q, k, v, scale, causal, want, got, shown)
    return {}


# --- 7. decode attention --------------------------------------------------------------------------
DECODE_TABLES = [[7, 2, 9], [4, 1], [8, 5, 3, 6]]
DECODE_LENS = [11, 6, 15]


def check_decode(ws: Workspace) -> dict:
    """paged_attention_decode on a batch of three (-1 padded block_tables, context_lens) against the
    contiguous reference: each row's history read through the library's slots, then the library's
    attention."""
    kc, vc = _filled_pool(seed=7)
    query = _random(len(DECODE_TABLES), 4, 8, seed=70)
    block_tables = ref_addr.pad_block_tables(DECODE_TABLES)
    lens = torch.tensor(DECODE_LENS)
    shown = (
        f"block_tables={DECODE_TABLES} (-1 padded), context_lens={DECODE_LENS}, "
        f"query{tuple(query.shape)}"
    )
    got = ws["attention"].paged_attention_decode(query, kc, vc, block_tables.clone(), lens.clone())
    got = expect_tensor(got, tuple(query.shape), "paged_attention_decode", "attention", shown)
    for b, (table, ctx) in enumerate(zip(DECODE_TABLES, DECODE_LENS)):
        want = decode_ref(query[b], kc, vc, table, ctx)
        if not close(got[b], want):
            link, en, zh = decode_diagnosis(
                got[b], query[b], kc, vc, DECODE_TABLES, DECODE_LENS, b
            )
            raise Failure(
                link,
                f"paged_attention_decode: row {b} differs from the contiguous reference"
                + (f": {en}" if en else ""),
                f"paged_attention_decode：第 {b} 行与连续参考不同"
                + (f"：{zh}" if zh else ""),
                shown,
                short(want),
                short(got[b]),
            )
    return {}


def _engine(ws: Workspace) -> dict:
    from .engine_check import check_engine  # the model is loaded only when this exercise runs

    return check_engine(ws)


# name -> (check, time limit in seconds): the engine loads the shipped model and runs ~60 steps
EXERCISES: dict[str, tuple[Callable[[Workspace], dict | None], float]] = {
    "locate": (check_locate, 10),
    "slot_mapping": (check_slot_mapping, 10),
    "write_kv": (check_write_kv, 10),
    "gather_loop": (check_gather_loop, 10),
    "gather": (check_gather, 10),
    "attention": (check_attention, 10),
    "decode": (check_decode, 10),
    "block_manager": (check_block_manager, 10),
    "state_rule": (check_state_rule, 10),
    "engine": (_engine, 60),
}
assert set(LINKS) >= {"gather", "attention"}
