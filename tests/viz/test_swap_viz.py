"""viz/swap.py: the pool / swap-pool cells tell who holds each block and what moved; the cost bars plot the rows."""

from viz.cells import read_cells
from viz.swap import cost_figure, pools_html


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
