"""Figures for "break it": how much each query row moved when the causal mask was removed."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .colors import OKABE_ITO
from .figure import make_figure, title_layout


def row_diff_figure(positions: Sequence[int], row_diff: Sequence[float], changed: Sequence[bool], title: str = "",
                    x_title: str = "query position", y_title: str = "max |Δ|") -> go.Figure:
    """One bar per query row (its token position): max |Δ| against the reference; rows beyond tolerance in
    vermillion, unchanged ones in blue. Trace "rows"."""
    if not (len(positions) == len(row_diff) == len(changed)):
        raise ValueError(f"positions, row_diff and changed must have the same length, got {len(positions)}, "
                         f"{len(row_diff)}, {len(changed)}")
    colors = [OKABE_ITO["vermillion"] if c else OKABE_ITO["blue"] for c in changed]
    bars = dict(type="bar", name="rows", x=[f"q{p}" for p in positions], y=[float(d) for d in row_diff],
                marker=dict(color=colors), hovertemplate="%{x}: %{y:.3g}<extra></extra>")
    layout = title_layout(title, 260, bottom=40)
    layout.update(showlegend=False, bargap=0.15, xaxis=dict(title=x_title, type="category", fixedrange=True),
                  yaxis=dict(title=y_title, rangemode="tozero", fixedrange=True, gridcolor="#E5E5E5"))
    return make_figure([bars], layout)
