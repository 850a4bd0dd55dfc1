"""Views of a BlockManager for the pages and the tests: who owns each physical block, what sharing saves, and the
bookkeeping's invariants. BlockManager inherits them, so block_manager.py holds the article's operations (allocate,
append_slot, fork, copy-on-write, free)."""

from __future__ import annotations

from typing import Iterable, Mapping


def first_owners(tables: Mapping[int, Iterable[int]], num_blocks: int) -> list[int | None]:
    """physical block -> the first seq id (in the tables' order: allocation order) whose table holds it, or None
    when no table does. tables: seq_id -> block table."""
    owners: list[int | None] = [None] * num_blocks
    for seq_id, table in tables.items():
        for block in table:
            if block >= 0 and owners[block] is None:  # -1: a hole (a block a sliding window freed)
                owners[block] = seq_id
    return owners


class BlockViews:
    """Mixed into BlockManager: reads its `tables` (seq_id -> block table), `num_blocks`, `ref_counts`, free queue
    and prefix cache; changes nothing."""

    block_hash = property(lambda self: self.cache.block_hash, doc="cached block -> the hash it is filed under")
    block_tokens = property(lambda self: self.cache.block_tokens, doc="cached block -> its token ids")

    def ownership(self) -> list[int | None]:
        """physical block -> owning seq id (the first owner if shared), or None when free (built on demand)."""
        return first_owners(self.tables, self.num_blocks)

    def block_owners(self) -> list[tuple[int, ...]]:
        """physical block -> every seq id whose table holds it (empty when free)."""
        owners: list[tuple[int, ...]] = [()] * self.num_blocks
        for seq_id, table in self.tables.items():
            for block in (b for b in table if b >= 0):  # -1: a hole
                owners[block] += (seq_id,)
        return owners

    def num_shared_saved(self) -> int:
        """Blocks that sharing saves right now: references held minus distinct blocks in use."""
        return sum(self.ref_counts) - sum(c > 0 for c in self.ref_counts)

    def check_invariants(self) -> None:
        """Assert the bookkeeping is consistent (used by tests and the app's self-check)."""
        counts = [len(o) for o in self.block_owners()]
        assert counts == self.ref_counts, "ref counts differ from the number of tables holding each block"
        free = self.free_block_ids
        assert all((b in free) == (counts[b] == 0) for b in range(self.num_blocks)), "free queue != blocks with ref 0"
        self.cache.check()
