"""One way to turn plain trace/layout dicts into a `go.Figure`, fast.

Plotly validates every property on construction, which is ~90% of the cost of building these figures (~20 ms for
the pool grid vs ~2 ms without) and would dominate a page's server time. The builders are tested with validation on
(PAGED_VALIDATE_FIGURES=1, as the figure tests set it), so the app builds them without it.
"""

from __future__ import annotations

import os

import plotly.graph_objects as go


def make_figure(data: list[dict], layout: dict) -> go.Figure:
    """go.Figure(data, layout); validated only when PAGED_VALIDATE_FIGURES=1."""
    validate = os.environ.get("PAGED_VALIDATE_FIGURES", "") == "1"
    return go.Figure(data=data, layout=layout, _validate=validate)


def title_layout(title: str, height: int, top: int = 36, bottom: int = 10) -> dict:
    """The layout every figure here shares: white plot, small margins, a left-aligned title when given."""
    return dict(title=dict(text=title, x=0, font=dict(size=14)) if title else None, height=height,
                margin=dict(l=10, r=10, t=top if title else 8, b=bottom), plot_bgcolor="white")
