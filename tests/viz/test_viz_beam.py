"""viz/beam.py: the beam tree and the savings figure draw what they are given."""

from __future__ import annotations

from viz.beam import TreeWords, freed_overlay, savings_figure, tree_figure
from viz.sharing import refcount_pool_figure
from viz_util import trace

NODES = [dict(key=(0, -1), depth=0, rank=0, seq_id=-1, token="⟨prompt⟩", score=0.0, kind="root"),
         dict(key=(1, 0), depth=1, rank=0, seq_id=0, token="h", score=-0.1, kind="beam"),
         dict(key=(1, 1), depth=1, rank=1, seq_id=1, token="x", score=-2.0, kind="pruned"),
         dict(key=(2, -100), depth=2, rank=-1, seq_id=0, token="⟨EOS⟩", score=-0.2, kind="finished")]
EDGES = [((0, -1), (1, 0)), ((0, -1), (1, 1)), ((1, 0), (2, -100))]


def test_tree_draws_each_kind_and_every_edge(validate_figures):
    """One trace per kind present, named by its legend word; three edges as three segments; hovers name the beam."""
    words = TreeWords()
    fig = tree_figure(NODES, EDGES, "tree", words)
    assert [t.name for t in fig.data] == ["edges", words.root, words.legend_beam, words.legend_pruned,
                                         words.legend_finished]
    assert len(trace(fig, "edges").x) == 9  # (x0, x1, None) per edge
    pruned = trace(fig, words.legend_pruned)
    assert list(pruned.x) == [1] and "pruned" in pruned.hovertext[0] and pruned.marker.symbol == "x"
    assert list(trace(fig, words.legend_finished).y) == [-1.5]  # hypotheses drawn below the live beams


def test_savings_figure_one_line_per_prompt_and_the_paper_band(validate_figures):
    """Each prompt is a line over the widths with its savings; the paper's range is a band from lo to hi."""
    rows = [dict(prompt="no", beam_width=2, saving=23.1), dict(prompt="no", beam_width=4, saving=34.8),
            dict(prompt="abc", beam_width=2, saving=32.0)]
    fig = savings_figure(rows, (37.6, 55.2), "t", paper_name="paper", y_title="saved")
    assert list(trace(fig, "'no'").y) == [23.1, 34.8] and list(trace(fig, "'abc'").x) == [2]
    assert sorted(set(trace(fig, "paper").y)) == [37.6, 55.2]


def test_freed_overlay_crosses_the_freed_blocks_where_the_pool_draws_them(validate_figures):
    """Each freed block gets a cross at its own cell of the pool (same columns), its hover naming block and beam."""
    pool = refcount_pool_figure(20, 4, {0: [1, 2]}, {0: 6}, [0, 1, 1] + [0] * 17, cols=8)
    fig = freed_overlay(pool, {3: [5, 12]}, 8, "block {block} freed by {seq}")
    cells = trace(fig, "blocks")
    freed = trace(fig, "freed")
    assert [(x, y) for x, y in zip(freed.x, freed.y)] == [(cells.x[5], cells.y[5]), (cells.x[12], cells.y[12])]
    assert list(freed.hovertext) == ["block 5 freed by D", "block 12 freed by D"]
