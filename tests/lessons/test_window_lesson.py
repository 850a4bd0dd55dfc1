"""lessons/window.py: the recorded run behind page 11 (A with the window, its contiguous twin, full attention; B
joining after A's prefill)."""

from __future__ import annotations

import pytest

from lessons.window import WindowConfig, run_window
from paged.chapters.window import HOLE


def test_the_neighbour_reuses_what_the_window_freed_and_memory_stays_flat(shipped):
    """Default run: B's prefill takes exactly the blocks A's prefill freed behind its window; A never holds more
    than ceil(W / bs) + 1 blocks between steps while full attention's count keeps growing; the twins agree."""
    run = run_window(WindowConfig(), *shipped)
    assert run.frames[1].freed and sorted(run.frames[2].taken) == sorted(run.frames[1].freed)
    assert all(sum(b != HOLE for b in f.table) <= run.bound for f in run.frames)
    assert run.frames[-2].held < run.frames[-2].held_full
    assert run.drift_step is None and run.frames[-1].token_ids != run.full_ids  # the window changes the text


def test_freeing_one_block_early_drifts_right_after_the_neighbour_writes(shipped):
    """The break-it: the block A's window starts in is freed too; B's prefill overwrites it, and A's next token
    already differs from the contiguous twin's (step 3: A's first decode after B's prefill)."""
    assert run_window(WindowConfig(free_early=True), *shipped).drift_step == 3


def test_config_refuses_values_off_the_menu():
    """A window, block size or prompt the page does not offer is a ValueError naming the menus."""
    with pytest.raises(ValueError, match="window must be one of"):
        WindowConfig(window=5)
