"""Naming the first broken link: a failed exercise's `Failure`, and the diagnoses shared by the exercises and the
end-to-end run (which link of the address chain a wrong slot, a misplaced write or a misread row points to).

Links are named in the seed's vocabulary (LINKS). A slot that should be `table[t // bs] * bs + t % bs`:
    same physical block, another offset          -> block_offset
    a block of the table, another logical block  -> logical_block_id
    another offset (spilled into the next block) -> block_offset
    any other block                              -> physical_block_id
"""

from __future__ import annotations

from typing import Any

import torch

LINKS = ("logical_block_id", "physical_block_id", "block_offset", "slot_mapping", "context_len", "gather",
         "attention", "cached_token_count", "generated_token_ids", "block_table", "free_blocks")


class Failure(Exception):
    """One exercise failed: what went wrong (English, 简体中文), on which input, what was expected and what came, and
    the first link of the chain whose value differs (one of LINKS, or None when no link can be named)."""

    def __init__(self, link: str | None, en: str, zh: str, input: Any = None, expected: Any = None,
                 got: Any = None) -> None:
        assert link is None or link in LINKS, link
        super().__init__(en)
        self.link, self.en, self.zh = link, en, zh
        self.input, self.expected, self.got = input, expected, got


def short(value: Any, limit: int = 160) -> str:
    """A value as the report prints it: tensors as shape + the first values, cut at `limit` characters."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().flatten()[:8].tolist()
        text = f"tensor{tuple(value.shape)} {value.dtype} {[round(x, 4) if isinstance(x, float) else x for x in flat]}"
        text += "…" if value.numel() > 8 else ""
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


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


def expect_tensor(value: Any, shape: tuple[int, ...], what: str, link: str | None, input: Any = None) -> torch.Tensor:
    """`value` if it is a tensor of `shape`; else a Failure naming what came (None, a list, a wrong shape). A wrong
    first dimension of a gather names context_len (the rows are tokens)."""
    if not isinstance(value, torch.Tensor):
        raise Failure(link, f"{what} must be a torch.Tensor of shape {shape}, got {type(value).__name__}",
                      f"{what} 应是形状为 {shape} 的 torch.Tensor，实际是 {type(value).__name__}",
                      input, f"tensor{shape}", short(value))
    if tuple(value.shape) != tuple(shape):
        tokens = link == "gather" and value.dim() == len(shape) and tuple(value.shape[1:]) == tuple(shape[1:])
        raise Failure("context_len" if tokens else link,
                      f"{what} has shape {tuple(value.shape)}, expected {shape}",
                      f"{what} 的形状是 {tuple(value.shape)}，应为 {shape}", input, shape, tuple(value.shape))
    return value


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """a ≈ b in float32, the tolerance scaled to b's magnitude (1e-5 relative)."""
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape or not torch.isfinite(a).all():
        return False
    return bool((a - b).abs().max() <= 1e-5 * max(1.0, float(b.abs().max())))
