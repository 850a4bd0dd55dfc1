"""lessons/window.py: the recorded run behind page 11 (A with the window, its contiguous twin, full attention; B
joining after A's prefill)."""

from __future__ import annotations

import pytest

from helpers import named_numbers
from lessons.window import A, B, WindowConfig, run_window, step_words
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


def _pieces(run, step: int) -> dict[str, dict]:
    return dict(step_words(run, step))


@pytest.mark.parametrize("window, block_size", [(6, 4), (2, 1)])
def test_the_neighbours_sentence_names_the_blocks_its_prefill_took(shipped, window, block_size):
    """Issue 38.1: step 2 names the blocks B's prefill wrote (its live table plus what its own window released in
    the same step), how many of those A's window had freed (never more than it names), and B's table after."""
    run = run_window(WindowConfig(window=window, block_size=block_size), *shipped)
    frame = run.frames[2]
    said = _pieces(run, 2)["said_prefill_b"]
    live_b = [b for b in frame.tables[B] if b != HOLE]
    wrote = set(live_b) | set(frame.neighbour_freed)
    assert set(said["blocks"]) == wrote
    from_a = wrote & set(run.frames[1].freed)
    assert said["taken"] == len(from_a) == len(said["taken_blocks"]) <= len(said["blocks"])
    assert set(said["taken_blocks"]) == from_a
    if frame.neighbour_freed:
        slid = _pieces(run, 2)["said_prefill_b_slid"]
        assert slid["held"] == live_b and set(slid["blocks"]) == set(frame.neighbour_freed)


def test_the_break_is_named_at_the_step_that_makes_it(shipped):
    """Issue 38.5: with free_early, step 1 counts only the blocks wholly before the window (tokens 9-14 at W 6,
    block_size 4: logical blocks 0 and 1) and names the block the window still starts in as the break; step 2
    says B's prefill took that very block."""
    run = run_window(WindowConfig(free_early=True), *shipped)
    frame, bs = run.frames[1], run.config.block_size
    a_blocks = frame.allocated[A]  # A's prefill: logical block i -> a_blocks[i]
    wholly = [a_blocks[i] for i in range(len(a_blocks)) if (i + 1) * bs <= frame.first_read]
    said = _pieces(run, 1)
    assert said["said_prefill_a"]["count"] == len(wholly) == frame.first_read // bs
    assert sorted(said["said_prefill_a"]["blocks"]) == sorted(wholly)
    starts_in = a_blocks[frame.first_read // bs]
    assert said["said_early"]["blocks"] == [starts_in] and starts_in in frame.table
    assert _pieces(run, 2)["said_overwrite"]["blocks"] == [starts_in]
    assert "said_early" not in _pieces(run_window(WindowConfig(), *shipped), 1)


def test_every_sentence_names_only_blocks_and_counts_the_step_holds(shipped):
    """Issue 38, the general rule on page 11: at every step of the default run (and its break), each block id a
    sentence names is one the step allocated, freed or lists in a table, and each count equals the length of a
    list the same step holds."""
    for config in (WindowConfig(), WindowConfig(free_early=True)):
        run = run_window(config, *shipped)
        for step, frame in enumerate(run.frames):
            held = set(frame.freed) | set(frame.neighbour_freed) | set(frame.taken)
            held |= {b for blocks in (*frame.allocated.values(), *frame.tables.values()) for b in blocks if b >= 0}
            for key, values in step_words(run, step):
                numbers = named_numbers(values)
                for field in ("blocks", "taken_blocks", "held"):
                    if field in numbers and key != "said_decode":
                        assert set(numbers[field]) <= held, (step, key, numbers[field])
                if "count" in numbers:
                    assert numbers["count"] == [len(values["blocks"]) if values["blocks"] != "—" else 0]
                if key == "said_decode":
                    assert values["held"] == sum(b != HOLE for b in frame.table) <= run.bound
