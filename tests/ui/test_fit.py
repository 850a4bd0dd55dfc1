"""ui.fit: a figure's title comes out (shown above it as text, so it wraps instead of being cut), the plot area
keeping its size; presenter mode makes every figure text >= 16 px, zooms cells, never past the projector's width."""

from __future__ import annotations

import plotly.graph_objects as go

from ui.fit import FIGURE_PX, PRESENT_PX, present_figure, take_title
from viz.pool import pool_figure


def pool(num_blocks: int = 12):
    return pool_figure(num_blocks, 4, {0: [7, 2, 9], 1: [4, 1]}, {0: 10, 1: 6}, highlight=[9],
                       title="Physical pool: a title long enough to need more than one line at a projector's width")


def test_take_title_returns_it_and_gives_back_its_margin():
    fig = pool()
    height, top = fig.layout.height, fig.layout.margin.t
    assert take_title(fig).startswith("Physical pool")
    assert not fig.layout.title.text and fig.layout.margin.t == 10 and fig.layout.height == height - (top - 10)
    assert take_title(fig) is None


def text_sizes(fig) -> list[float]:
    out = []
    for trace in fig.data:
        if "text" in (trace.mode or "") and trace.textfont and trace.textfont.size is not None:
            size = trace.textfont.size
            out += list(size) if isinstance(size, (list, tuple)) else [size]
    return out


def test_presenter_figures_have_large_text_and_bigger_cells_within_the_projector():
    small, big = pool(), present_figure(pool())
    assert min(text_sizes(big)) >= FIGURE_PX > min(text_sizes(small))
    assert big.layout.width <= PRESENT_PX and big.layout.width > small.layout.width
    assert big.data[1].marker.size > small.data[1].marker.size  # the cells grow with the text
    assert big.layout.font.size >= FIGURE_PX and big.layout.legend.font.size >= FIGURE_PX


def test_presenter_drops_labels_that_cannot_be_legible_rather_than_shrinking_them():
    """A 64-block pool's cells stay small at the projector's width: their labels go (the hover keeps them)."""
    big = present_figure(pool(num_blocks=64))
    assert big.layout.width <= PRESENT_PX and all(s >= FIGURE_PX for s in text_sizes(big))


def test_a_stretching_figure_gets_large_text_too():
    """A figure without a width (it stretches to the column) and with labels smaller than FIGURE_PX: presenter
    mode makes its labels and axis ticks FIGURE_PX or more."""
    small = go.Figure(go.Scatter(x=[0, 1, 2], y=[0, 1, 0], mode="markers+text", text=["A0", "A1", "B0"],
                                 textfont=dict(size=10)),
                      layout=dict(title=dict(text="mapping"), height=230,
                                  yaxis=dict(tickvals=[0, 1], ticktext=["physical", "logical"])))
    assert small.layout.width is None and min(text_sizes(small)) < FIGURE_PX
    fig = present_figure(small)
    assert text_sizes(fig) and all(s >= FIGURE_PX for s in text_sizes(fig))
    assert fig.layout.yaxis.tickfont.size >= FIGURE_PX


def test_take_title_keeps_room_for_labels_above_the_plot():
    """Page 7's histogram labels its dashed lines above the plot area (paper y = 1): once the title is out, the top
    margin still holds a line of that text (it was cut to 10 px, hiding half the label)."""
    from viz.fast import trace_figure

    fig = trace_figure([100, 300, 500], 2048, title="Final lengths", mean_label="mean")
    height, top = fig.layout.height, fig.layout.margin.t
    assert take_title(fig) == "Final lengths"
    label_px = max(a.font.size for a in fig.layout.annotations if a.yref == "paper" and a.y >= 1)
    assert label_px * 1.2 <= fig.layout.margin.t < top and fig.layout.height == height - (top - fig.layout.margin.t)


def test_presenter_keeps_labels_printed_beside_small_markers():
    """Issue 38: page 9's beam tree prints each node's token above its 13 px marker. Presenter mode
    dropped those labels as if they sat inside too small a cell (29 of 40 lost): every token stays,
    at FIGURE_PX or more."""
    from viz.beam import tree_figure

    nodes = [dict(key=(0, 0), depth=0, rank=0, seq_id=0, token="<s>", score=0.0, kind="root")]
    nodes += [dict(key=(d, r), depth=d, rank=r, seq_id=r, token=f"t{d}{r}", score=-d * 0.5,
                   kind="beam") for d in range(1, 6) for r in range(4)]
    edges = [((d - 1, 0 if d == 1 else r), (d, r)) for d in range(1, 6) for r in range(4)]
    def tokens(fig) -> list[str]:
        return [t for tr in fig.data if "text" in (tr.mode or "") for t in (tr.text or ())]

    small = tree_figure(nodes, edges, "tree")
    big = present_figure(tree_figure(nodes, edges, "tree"))
    assert len(tokens(small)) == len(nodes) and tokens(big) == tokens(small)
    assert text_sizes(big) and all(s >= FIGURE_PX for s in text_sizes(big))
