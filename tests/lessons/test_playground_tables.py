"""Playground.add_sequence with a drawn block table: exactly those blocks, or a ValueError and nothing changed."""

import pytest

from lessons.playground import Playground


def test_drawn_table_is_used_as_given():
    """The sequence's table is the drawn one and the decode twin check still passes on it."""
    pg = Playground(num_blocks=8, block_size=4, seed=5)
    seq = pg.add_sequence(6, [6, 2])
    assert seq.block_table == [6, 2] and pg.last_write[seq.seq_id] == [24, 25, 26, 27, 8, 9]
    pg.manager.check_invariants()


@pytest.mark.parametrize("block_ids, msg", [
    ([1], r"needs a list of exactly 2 block ids \(blocks of 4\), got \[1\]"),
    ([1, 2, 3], "exactly 2 block ids"),
    ("12", "exactly 2 block ids"),
    ([1, 1], "twice"),
    ([1.0, 2], "block id must be an integer"),
])
def test_bad_drawn_tables_change_nothing(block_ids, msg):
    pg = Playground(num_blocks=8, block_size=4, seed=5)
    free = list(pg.manager.free_block_ids)
    with pytest.raises(ValueError, match=msg):
        pg.add_sequence(6, block_ids)
    assert list(pg.manager.free_block_ids) == free and not pg.sequences and not pg.manager.tables


def test_a_drawn_block_already_held_is_refused():
    pg = Playground(num_blocks=8, block_size=4, seed=5)
    pg.add_sequence(3, [4])
    free = list(pg.manager.free_block_ids)
    with pytest.raises(ValueError, match=r"block\(s\) \[4\] are not free"):
        pg.add_sequence(3, [4])
    assert list(pg.manager.free_block_ids) == free and list(pg.sequences) == [0]
