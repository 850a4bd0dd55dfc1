"""The engine's chain as a live diagram: seven module boxes top to bottom, joined by arrows, each arrow labelled
with the values this step handed on; a module that did nothing this step is dimmed, the selected one outlined.

    Scheduler → Block Manager → ModelRunner → PagedAttention → Sampler → Sequence update → free finished blocks
    (and from the last one back to the Scheduler: the next step)

Data in (names, which are active, one label per arrow), figure out: the words come from the caller.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .colors import OKABE_ITO
from .figure import make_figure, title_layout

BOX_W, BOX_H, ROW = 2.6, 0.62, 1.0  # box size and the distance between box centres (data units)
TEXT_X = BOX_W + 0.35  # where an arrow's label starts
ACTIVE_FILL, IDLE_FILL = OKABE_ITO["sky_blue"], "#F2F2F2"
ACTIVE_INK, IDLE_INK = "#000000", "#9A9A9A"


def chain_live_figure(names: Sequence[str], active: Sequence[bool], labels: Sequence[str], title: str = "",
                      selected: int | None = None) -> go.Figure:
    """names[i]: module i's name; active[i]: it did something this step; labels[i]: the values on the arrow leaving
    it (the last one loops back to the first). `selected` outlines that box. One invisible marker trace named
    "modules" carries the hover text (a box per point, in order)."""
    n = len(names)
    if not (len(active) == len(labels) == n):
        raise ValueError(f"names, active and labels must have the same length, got {n}, {len(active)}, "
                         f"{len(labels)}")
    shapes, notes = [], []
    for i, (name, on, label) in enumerate(zip(names, active, labels)):
        y = -i * ROW
        outline = 3 if i == selected else 1.2
        shapes.append(dict(type="rect", x0=0, x1=BOX_W, y0=y - BOX_H / 2, y1=y + BOX_H / 2,
                           fillcolor=ACTIVE_FILL if on else IDLE_FILL, layer="below",
                           line=dict(color="#000000" if i == selected else ("#333333" if on else "#BBBBBB"),
                                     width=outline, dash="solid" if on else "dot")))
        notes.append(dict(x=BOX_W / 2, y=y, text=f"<b>{i + 1}. {name}</b>", showarrow=False,
                          font=dict(size=13, color=ACTIVE_INK if on else IDLE_INK)))
        ink = ACTIVE_INK if on else IDLE_INK
        if i + 1 < n:  # the arrow down to the next module, its label beside it
            notes.append(dict(x=BOX_W / 2, y=y - ROW + BOX_H / 2 + 0.02, ax=BOX_W / 2, ay=y - BOX_H / 2 - 0.02,
                              xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True, arrowhead=2,
                              arrowsize=1.1, arrowwidth=1.6, arrowcolor=ink))
            notes.append(dict(x=TEXT_X, y=y - ROW / 2, text=label, showarrow=False, xanchor="left",
                              align="left", font=dict(size=12, color=ink, family="monospace")))
        else:  # the last module's output goes back to the scheduler for the next step
            notes.append(dict(x=TEXT_X, y=y, text=f"↺ {label}", showarrow=False, xanchor="left", align="left",
                              font=dict(size=12, color=ink, family="monospace")))
    hover = dict(type="scatter", name="modules", x=[BOX_W / 2] * n, y=[-i * ROW for i in range(n)], mode="markers",
                 marker=dict(size=30, opacity=0), hovertext=[f"{nm}: {lb}" for nm, lb in zip(names, labels)],
                 hoverinfo="text", showlegend=False)
    layout = title_layout(title, 70 * n + 40)
    layout.update(shapes=shapes, annotations=notes, showlegend=False,
                  xaxis=dict(visible=False, range=[-0.1, 12.0], fixedrange=True),
                  yaxis=dict(visible=False, range=[-(n - 1) * ROW - 0.5, 0.5], fixedrange=True))
    return make_figure([hover], layout)
