"""viz/swap.py: the pool / swap-pool cells tell who holds each block and what moved; the cost bars plot the rows."""

from viz.cells import read_cells
from viz.swap import cost_figure, log_ticks, pools_html


def test_pools_show_holders_and_what_moved():
    """Held blocks print their sequence and logical block; a swap-out's sources are dashed, its destinations in
    the swap pool outlined; free blocks print their id."""
    markup = pools_html(4, {0: [2, 0]}, 3, {1: [1]}, swap_out={1: [(3, 1)]}, swap_in={})
    cells = read_cells(markup)
    assert len(cells) == 7
    texts = [c["text"] for c in cells]
    assert texts[:4] == ["A1", "1", "A0", "3"] and texts[4:] == ["0", "B0", "2"]
    assert "pg-pre" in cells[3]["classes"] and "pg-sched" in cells[5]["classes"]
    assert "left this step" in cells[3]["title"] and "arrived this step" in cells[5]["title"]
    assert len(read_cells(pools_html(4, {}, 0, {}, {}, {}))) == 4, "no swap pool row in recompute mode"


def test_cost_figure_has_three_series_by_block_size(validate_figures):
    """One bar series per cost (batched swap, per-block swap, recompute), x = block sizes, log y."""
    rows = [dict(block_size=b, swap_ms=0.1 * b, swap_per_block_ms=1.0 / b, recompute_ms=5.0) for b in (1, 16)]
    fig = cost_figure(rows, 128, 3).to_dict()
    assert [list(t["x"]) for t in fig["data"]] == [["1", "16"]] * 3
    assert list(fig["data"][2]["y"]) == [5.0, 5.0] and fig["layout"]["yaxis"]["type"] == "log"


def test_a_block_left_and_taken_in_one_step_is_outlined_as_taken():
    """Issue 38.2: C (seq 2) freed blocks 0 and 1; A took block 1 in the same step: block 1 is outlined, its hover
    says A took it and C left it, and it is not "left this step"; block 0 still is."""
    markup = pools_html(3, {0: [2, 1]}, 0, {}, {}, {}, freed={2: [0, 1]}, handed={1: (2, 0)})
    cells = read_cells(markup)
    assert "pg-pre" in cells[0]["classes"] and "left this step" in cells[0]["title"]
    assert "pg-sched" in cells[1]["classes"] and "pg-pre" not in cells[1]["classes"]
    assert "left this step" not in cells[1]["title"] and "A, logical block 1" in cells[1]["title"]
    assert "C left it" in cells[1]["title"]


def test_log_axis_ticks_read_their_own_values():
    """Issue 38 (page 10): the cost axis' tick labels are their values (0.2, 2 and 20 no longer all read "2"), the
    ticks cover the bars, and no two labels are alike."""
    rows = [{"block_size": b, "swap_ms": s, "swap_per_block_ms": p, "recompute_ms": r}
            for b, s, p, r in ((1, 0.21, 3.0, 19.0), (16, 0.3, 0.5, 18.0))]
    axis = cost_figure(rows, 128, 3).layout.yaxis
    values, labels = list(axis.tickvals), list(axis.ticktext)
    assert [float(x) for x in labels] == values and len(set(labels)) == len(labels)
    assert values[0] <= 0.21 and values[-1] >= 19.0
    assert log_ticks([]) == [] and log_ticks([1.0]) == [1.0]
