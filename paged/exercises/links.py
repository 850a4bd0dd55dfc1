"""Naming the first broken link: a failed exercise's `Failure`, and the diagnoses shared by the
exercises and the end-to-end run (which link of the address chain a wrong slot, a misplaced write or
a misread row points to).

Links are named in the seed's vocabulary (LINKS). A slot that should be `table[t // bs] * bs + t %
bs`:
    same physical block, another offset          -> block_offset
    a block of the table, another logical block  -> logical_block_id
    another offset (spilled into the next block) -> block_offset
    any other block                              -> physical_block_id

"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from paged import addressing as ref_addr
from paged.attention import attention as ref_attention

Workspace = dict[str, ModuleType]  # the learner's modules by name (addressing, kv_cache, ...)
# In the chain's order (the page's strip shows them so): the address chain, the read, then the
# bookkeeping.
LINKS = (
    "logical_block_id",
    "physical_block_id",
    "block_offset",
    "slot_mapping",
    "context_len",
    "gather",
    "attention",
    "block_table",
    "free_blocks",
    "cached_token_count",
    "generated_token_ids",
)


class Failure(Exception):
    """One exercise failed: what went wrong (English, Chinese), on which input, what was expected,
    what came, and the first link of the chain whose value differs (one of LINKS, or None when no
    link can be named)."""

    def __init__(
        self,
        link: str | None,
        en: str,
        zh: str,
        input: Any = None,
        expected: Any = None,
        got: Any = None,
    ) -> None:
        assert link is None or link in LINKS, link
        super().__init__(en)
        self.link, self.en, self.zh = link, en, zh
        self.input, self.expected, self.got = input, expected, got


def short(value: Any, limit: int = 160) -> str:
    """A value as the report prints it: tensors as shape + the first values, text as it is, anything
    else as its repr; cut at `limit` characters."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().flatten()[:8].tolist()
        shown = [round(x, 4) if isinstance(x, float) else x for x in flat]
        text = f"tensor{tuple(value.shape)} {value.dtype} {shown}"
        text += "…" if value.numel() > 8 else ""
    else:
        text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def chain_link(token_index: int, table: list[int], block_size: int, slot: int) -> str:
    """The link a wrong `slot` for token `token_index` breaks (module docstring's rule)."""
    logical_block_id, block_offset = divmod(token_index, block_size)
    physical_block_id = table[logical_block_id]
    got_block, got_offset = divmod(int(slot), block_size)
    if got_block == physical_block_id:
        return "block_offset"
    if got_block in table:
        return "logical_block_id"
    if got_offset != block_offset:
        return "block_offset"
    return "physical_block_id"


def find_row(flat: torch.Tensor, row: torch.Tensor) -> int | None:
    """The first index i with flat[i] == row exactly (flat [S, ...], row [...]), else None."""
    if tuple(row.shape) != tuple(flat.shape[1:]):
        return None
    hits = (flat == row).flatten(1).all(dim=1).nonzero()
    return int(hits[0]) if hits.numel() else None


def expect_tensor(
    value: Any, shape: tuple[int, ...], what: str, link: str | None, input: Any = None
) -> torch.Tensor:
    """`value` if it is a tensor of `shape`; else a Failure naming what came (None, a list, a wrong
    shape). A wrong first dimension of a gather names context_len (the rows are tokens)."""
    if not isinstance(value, torch.Tensor):
        raise Failure(
            link,
            f"{what} must be a torch.Tensor of shape {shape}, got {type(value).__name__}",
            f"{what} 应是形状为 {shape} 的 torch.Tensor，实际是 {type(value).__name__}",
            input,
            f"tensor{shape}",
            short(value),
        )
    if tuple(value.shape) != tuple(shape):
        tokens = (
            link == "gather"
            and value.dim() == len(shape)
            and tuple(value.shape[1:]) == tuple(shape[1:])
        )
        raise Failure(
            "context_len" if tokens else link,
            f"{what} has shape {tuple(value.shape)}, expected {shape}",
            f"{what} 的形状是 {tuple(value.shape)}，应为 {shape}",
            input,
            shape,
            tuple(value.shape),
        )
    return value


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """a ≈ b in float32, the tolerance scaled to b's magnitude (1e-5 relative)."""
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape or not torch.isfinite(a).all():
        return False
    return bool((a - b).abs().max() <= 1e-5 * max(1.0, float(b.abs().max())))


def write_diagnosis(
    cache: torch.Tensor,
    want: torch.Tensor,
    rows: torch.Tensor,
    slots: list[int],
    name: str,
    shown: str,
) -> None:
    """Raise the Failure explaining why `cache` (after the learner's write) differs from `want`."""
    bs, flat = cache.shape[1], cache.flatten(0, 1)
    pad = " (slot -1 is padding: skip it)" if -1 in slots else ""
    for k, slot in enumerate(slots):
        if slot < 0 or torch.equal(flat[slot], rows[k]):
            continue
        landed = find_row(flat, rows[k])
        if landed is None:
            raise Failure(
                "slot_mapping",
                f"token {k}'s {name} is not at slot {slot} (nor anywhere): overwritten?{pad}",
                f"token {k} 的 {name} 不在 slot {slot}（哪里都没有）：被覆盖了？"
                + ("（-1 是 padding，要跳过）" if pad else ""),
                shown,
                f"slot {slot}",
                "nowhere",
            )
        same_block = landed // bs == slot // bs
        raise Failure(
            "block_offset" if same_block else "physical_block_id",
            f"token {k}'s {name} landed at slot {landed} "
            f"(block {landed // bs}, offset {landed % bs})",
            f"token {k} 的 {name} 写到了 slot {landed}"
            f"（block {landed // bs}，offset {landed % bs}）",
            shown,
            f"slot {slot} (block {slot // bs}, offset {slot % bs})",
            f"slot {landed}",
        )
    extra = (flat != want.flatten(0, 1)).flatten(1).any(dim=1).nonzero().flatten().tolist()
    raise Failure(
        "slot_mapping",
        f"{name} slots {extra} were written, but no token's slot is there{pad}",
        f"{name} 的 slot {extra} 被写了，但没有 token 的 slot 在那里"
        + ("（-1 是 padding，要跳过）" if pad else ""),
        shown,
        "untouched",
        f"written: {extra}",
    )


def decode_ref(
    q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, table: list[int], ctx: int
) -> torch.Tensor:
    slots = ref_addr.slot_mapping(table, 0, ctx, kc.shape[1])
    return ref_attention(q, kc.flatten(0, 1)[slots], vc.flatten(0, 1)[slots])


def decode_diagnosis(
    got: torch.Tensor,
    q: torch.Tensor,
    kc: torch.Tensor,
    vc: torch.Tensor,
    tables: list[list[int]],
    lens: list[int],
    b: int,
) -> tuple[str, str, str]:
    """(link, English, Chinese) for row b's wrong decode output [num_heads, head_dim]: it equals
    attention over a context one token short or long (context_len), or through another row's table
    (block_table); else the link is attention and the texts are empty.
    Raises: nothing."""
    bs = kc.shape[1]
    wrong = ((lens[b] - 1, "-", "short", "少"), (lens[b] + 1, "+", "too many", "多"))
    for ctx, sign, en, zh in wrong:
        if 1 <= ctx <= len(tables[b]) * bs and close(got, decode_ref(q, kc, vc, tables[b], ctx)):
            return (
                "context_len",
                f"row {b} matches attention over context_len {sign} 1 = {ctx} tokens: one token "
                f"{en}",
                f"第 {b} 行等于对 context_len {sign} 1 = {ctx} 个 token 的 attention："
                f"{zh}了一个 token",
            )
    for other, table in enumerate(tables):
        if (
            other != b
            and lens[b] <= len(table) * bs
            and close(got, decode_ref(q, kc, vc, table, lens[b]))
        ):
            return (
                "block_table",
                f"row {b} matches attention through row {other}'s block table",
                f"第 {b} 行等于经第 {other} 行 block table 的 attention",
            )
    return "attention", "", ""


def held_blocks(seqs: list) -> list[int]:
    return [b for s in seqs for b in s.block_table]


def check_tables(bm, live: list, num_blocks: int, shown: str, exact=None) -> None:
    """Every live table has the blocks its tokens need (`exact`, the sequence just allocated or
    appended to: blocks_needed(num_tokens); the others at least those of their cached tokens), ids
    in the pool, none twice; the free count is the rest."""
    for s in live:
        need = ref_addr.blocks_needed(s.num_tokens, bm.block_size)
        low = need if s is exact else ref_addr.blocks_needed(s.cached_token_count, bm.block_size)
        if not isinstance(s.block_table, list) or not low <= len(s.block_table) <= need:
            raise Failure(
                "block_table",
                f"sequence {s.seq_id} holds {short(s.block_table)}: {need} blocks needed",
                f"序列 {s.seq_id} 持有 {short(s.block_table)}：应有 {need} 个 block",
                shown,
                need,
                short(s.block_table),
            )
    held = held_blocks(live)
    if any(not isinstance(b, int) or not 0 <= b < num_blocks for b in held):
        raise Failure(
            "block_table",
            "a block table holds an id outside the pool",
            "block table 里有池外的 id",
            shown,
            f"ids in [0, {num_blocks})",
            held,
        )
    twice = sorted({b for b in held if held.count(b) > 1})
    if twice:
        raise Failure(
            "block_table",
            f"physical block(s) {twice} appear twice among the live tables (aliased)",
            f"physical block {twice} 在活着的 block table 中出现两次（别名）",
            shown,
            "each block once",
            {s.seq_id: list(s.block_table) for s in live},
        )
    if bm.num_free_blocks != num_blocks - len(held):
        raise Failure(
            "free_blocks",
            "num_free_blocks does not count the blocks nobody holds",
            "num_free_blocks 与没人持有的 block 数不符",
            shown,
            num_blocks - len(held),
            bm.num_free_blocks,
        )


def check_appended(bm, seq, live: list, num_blocks: int, block_size: int, token: int, slot,
                   shown: str, step: int | None = None) -> int:
    """After `slot = bm.append_slot(seq)` for token `token`: the tables still hold (check_tables,
    seq exact) and `slot` is the token's slot through seq's table; returns that slot. `step`, the
    decode step, is named in the message.
    Raises: Failure (block_table, free_blocks or slot_mapping)."""
    check_tables(bm, live, num_blocks, shown, seq)
    want = ref_addr.slot_of(token, seq.block_table, block_size)
    if slot != want:
        en, zh = ("", "") if step is None else (f" (decode step {step})", f"（第 {step} 个 decode 步）")
        raise Failure(
            "slot_mapping",
            f"append_slot gave token {token} a wrong slot{en}",
            f"append_slot 给 token {token} 的 slot 不对{zh}",
            shown,
            want,
            slot,
        )
    return want

def check_freed(seq, table: list[int], freed, shown: str) -> None:
    """After `freed = bm.free(seq)`: the sequence no longer holds a table, and every block of
    `table` (the one it held before) came back.
    Raises: Failure (block_table or free_blocks) naming what is wrong."""
    if seq.block_table:
        raise Failure(
            "block_table",
            "after free, the sequence still holds its table: a read would use freed blocks",
            "free 之后序列仍持有它的表：再读就是 use after free",
            shown,
            [],
            list(seq.block_table),
        )
    if sorted(freed or []) != sorted(table):
        raise Failure(
            "free_blocks",
            "free must return every block of the table",
            "free 应返回表里的每个 block",
            shown,
            sorted(table),
            short(freed),
        )
