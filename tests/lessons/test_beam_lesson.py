"""lessons/beam.py: what page 9 steps through, checked against the block tables themselves: each step's view
(ref counts, free blocks, copies, prunes), the tree, the memory with and without sharing, the twin check that the
break-it trips, and the quiz's answers."""

from __future__ import annotations

import pytest

from lessons.beam import BeamConfig, BeamLesson, beam_question, memory_savings, ref_counts


@pytest.fixture(scope="module")
def lesson(shipped):
    return BeamLesson(BeamConfig(), *shipped)


def test_views_tell_the_truth_about_the_pool(lesson):
    """At every step: a block's ref count is the number of beam tables holding it, free blocks are those held by
    none, every table covers its beam's cached tokens, and the end frees everything."""
    size = lesson.config.block_size
    for i in range(len(lesson.traces) + 1):
        v = lesson.view(i)
        holders = [sum(b in t for t in v.tables.values()) for b in range(v.num_blocks)]
        assert v.ref_counts == holders and v.num_free_blocks == holders.count(0)
        for seq_id, table in v.tables.items():
            assert len(table) * size >= v.cached[seq_id] > (len(table) - 1) * size - 1
    assert lesson.view(len(lesson.traces)).num_free_blocks == lesson.num_blocks


def test_a_fork_a_copy_and_a_prune_show_in_the_views(lesson):
    """The default search forks (a child's table equals its parent's), copies a shared block (the copy's source was
    held by several beams the step before), and prunes a beam (it holds nothing after)."""
    forks = copies = prunes = 0
    for i in range(1, len(lesson.traces) + 1):
        before, v = lesson.view(i - 1), lesson.view(i)
        for parent, children in v.forked.items():
            forks += len(children)
        for src, dst in v.copies:
            copies += 1
            assert before.ref_counts[src] > 1 and dst not in [b for t in before.tables.values() for b in t]
        for seq_id in v.pruned:
            prunes += 1
            assert seq_id not in v.tables
    assert forks and copies and prunes


def test_tree_has_one_edge_per_node_but_the_root(lesson):
    """Every node but the prompt hangs from exactly one parent node of the previous depth; K beams per depth."""
    nodes, edges = lesson.tree(len(lesson.traces))
    keys = {n["key"]: n for n in nodes}
    assert len(edges) == len(nodes) - 1 and sum(n["kind"] == "root" for n in nodes) == 1
    for parent, child in edges:
        assert keys[parent]["depth"] == keys[child]["depth"] - 1
    assert sum(n["kind"] == "finished" for n in nodes) == lesson.config.beam_width
    assert any(n["kind"] == "pruned" for n in nodes)


def test_memory_without_sharing_is_the_sum_of_table_lengths(lesson):
    """The memory series counts distinct blocks (with sharing) and table lengths (without), step by step."""
    steps, shared, unshared = lesson.memory()
    for t, s, u in zip(lesson.traces, shared, unshared):
        tables = t.tables_read.values()
        assert s == len({b for tbl in tables for b in tbl}) <= u == sum(map(len, tables))
    assert sum(shared) < sum(unshared)


def test_twin_check_agrees_and_the_break_it_trips_it(lesson, shipped):
    """The paged beams equal the contiguous twin's; with the copy-on-write skipped they do not, from a step on."""
    assert lesson.twin_check() == (True, None)
    broken = BeamLesson(BeamConfig(skip_cow=True), *shipped)
    same, first_bad = broken.twin_check()
    assert not same and 1 <= first_bad <= len(broken.traces)
    assert any(t.cow_skipped for t in broken.traces[:first_bad])


def test_quiz_answers_are_the_next_steps_counts(lesson):
    """The question about step i + 1 is answered by its copies or its freed blocks; none after the last step."""
    for step in range(len(lesson.traces)):
        for seed in (1, 2):
            q = beam_question(lesson, step, seed)
            t = lesson.traces[step]
            want = len(t.copies) if q.kind == "beam_copies" else sum(map(len, t.blocks_freed.values()))
            assert q.answer == want and len(q.choices) == 4
    assert beam_question(lesson, len(lesson.traces), 1) is None


def test_memory_savings_rows(shipped):
    """One row per prompt and width, each saving 1 - shared / unshared in %, with sharing saving something."""
    rows = memory_savings(*shipped, prompts=("no",), widths=(2, 4))
    assert [(r["prompt"], r["beam_width"]) for r in rows] == [("no", 2), ("no", 4)]
    for r in rows:
        assert 0 < r["shared"] < r["unshared"]
        assert abs(r["saving"] - 100 * (1 - r["shared"] / r["unshared"])) < 1e-9


def test_config_refuses_values_off_the_page():
    """A prompt, width or block size the page does not offer is refused by name."""
    for bad in (dict(prompt="x"), dict(beam_width=3), dict(block_size=5), dict(length_penalty=0.5)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            BeamConfig(**bad)
    assert ref_counts({0: [1, 2], 1: [2]}, 3) == [0, 1, 2]
