"""Figures fitted to the screen they are shown on, applied by ui.show_figure after a viz builder made them.

    take_title(fig)                   the title moves out of the figure, to be shown above it as page text
    present_figure(fig, max_width)    presenter mode: text >= 16 px, cells zoomed, never wider than max_width
    figure_spec / take_title_spec / present_spec   the same on the figure's plain dicts (what ui.show_figure sends)

A plotly title wider than its figure is cut at the figure's edge (plotly never wraps), and the server does not know
how wide the column will be. Shown as text above the figure, a title wraps like any paragraph, at every width.
"""

from __future__ import annotations

import plotly.graph_objects as go

PRESENT_PX = 920   # presenter mode at 1024 px: sidebar collapsed, 1.5rem margins, figures stacked
FIGURE_PX = 16     # presenter mode's smallest figure text
TITLE_PX = 20      # presenter mode's titles
MAX_ZOOM = 1.6


def figure_spec(fig: go.Figure) -> dict:
    """{"data": [trace dicts], "layout": dict}: the figure as plain dicts, without the deep copy of fig.to_dict()
    (~1 ms a figure here). The outer dicts are new; nested ones are the figure's own: copy one before changing it."""
    return {"data": [dict(trace) for trace in fig._data], "layout": dict(fig._layout)}


def _room_above(layout: dict) -> int:
    """The top margin a figure needs without its title: 10 px, or room for its text written above the plot area
    (an annotation at paper y >= 1, e.g. a dashed line's label: cut off by a 10 px margin)."""
    above = [a for a in layout.get("annotations") or [] if isinstance(a, dict) and a.get("yref") == "paper"
             and (a.get("y") or 0) >= 1 and a.get("text")]
    return max([10] + [int(((a.get("font") or {}).get("size") or 12) * 1.4) + 4 for a in above])


def take_title_spec(spec: dict) -> str | None:
    """take_title on a figure_spec: the title is removed from spec["layout"] (its nested dicts copied, never
    changed in place) and returned; None when it has none."""
    layout = spec["layout"]
    title = layout.get("title")
    text = title.get("text") if isinstance(title, dict) else title if isinstance(title, str) else None
    if not text:
        return None
    margin = dict(layout.get("margin") or {})
    top = margin.get("t") if margin.get("t") is not None else 100
    layout["title"] = {k: v for k, v in title.items() if k != "text"} if isinstance(title, dict) else {}
    margin["t"] = min(top, _room_above(layout))
    layout["margin"] = margin
    if layout.get("height"):
        layout["height"] = max(40, layout["height"] - max(0, top - margin["t"]))
    return text


def take_title(fig: go.Figure) -> str | None:
    """Remove the figure's title (returned, None when it has none) and the top margin it needed: the plot area
    keeps its size, a fixed height shrinks by the margin given back."""
    spec = figure_spec(fig)
    text = take_title_spec(spec)
    if text is not None:
        fig.layout.title.text = None
        fig.layout.margin.t = spec["layout"]["margin"]["t"]
        if fig.layout.height:
            fig.layout.height = spec["layout"]["height"]
    return text


def _scaled(value, f: float):
    if isinstance(value, (int, float)):
        return value * f
    if isinstance(value, (list, tuple)):
        return [v * f if isinstance(v, (int, float)) else v for v in value]
    return value


def _smallest(value) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)):
        nums = [v for v in value if isinstance(v, (int, float))]
        return float(min(nums)) if nums else None
    return None


def _shows_text(trace: dict) -> bool:
    if trace.get("type", "scatter") == "scatter":
        return "text" in (trace.get("mode") or "")
    return bool(trace.get("text") is not None or trace.get("texttemplate"))


def present_figure(fig: go.Figure, max_width: int = PRESENT_PX) -> go.Figure:
    """A copy of `fig` for presenter mode: every text >= FIGURE_PX (titles TITLE_PX), markers and a fixed size
    zoomed by up to MAX_ZOOM so cell labels fit, never wider than max_width. A cell label that would still be
    smaller than FIGURE_PX in a cell too small to hold it is dropped (its hover still tells everything)."""
    d = present_spec(fig.to_dict(), max_width)
    return go.Figure(data=d["data"], layout=d["layout"], _validate=False)


def _beside(trace: dict) -> bool:
    """Whether a scatter's text sits beside its markers (textposition "top center", …), not inside
    them: a small marker is then no reason to drop it (page 9's beam tree prints each token above its
    node). Raises: nothing."""
    pos = trace.get("textposition")
    spots = pos if isinstance(pos, (list, tuple)) else [pos]
    scatter = trace.get("type", "scatter") == "scatter"
    return scatter and pos is not None and "middle center" not in spots


def present_spec(d: dict, max_width: int = PRESENT_PX) -> dict:
    """present_figure on a figure's plain dict {"data", "layout"} (changed in place: pass a copy, e.g.
    fig.to_dict()); returns it."""
    data, layout = d.get("data", []), d.get("layout", {})
    text_fonts = [s for tr in data if _shows_text(tr)
                  for s in [_smallest((tr.get("textfont") or {}).get("size"))] if s]
    f = min(MAX_ZOOM, max([1.0] + [FIGURE_PX / s for s in text_fonts]))
    if layout.get("width"):
        f = max(1.0, min(f, max_width / layout["width"]))
    margin = layout.setdefault("margin", {})
    for tr in data:
        marker = tr.get("marker")
        if isinstance(marker, dict) and marker.get("size") is not None:
            marker["size"] = _scaled(marker["size"], f)
        if not _shows_text(tr):
            continue
        font = tr.setdefault("textfont", {})
        size = (_smallest(font.get("size")) or 12) * f
        cell = _smallest((marker or {}).get("size")) if isinstance(marker, dict) else None
        if size >= FIGURE_PX or cell is None or cell >= 2.1 * FIGURE_PX or _beside(tr):
            font["size"] = max(FIGURE_PX, size) if not isinstance(font.get("size"), list) else \
                [max(FIGURE_PX, v * f) for v in font["size"]]
        elif tr.get("type", "scatter") == "scatter":  # too small a cell for legible text: markers only
            tr["mode"] = (tr.get("mode") or "").replace("+text", "").replace("text+", "")
        else:
            tr.pop("texttemplate", None)
            tr.pop("text", None)
    for key in list(layout):
        if key.startswith(("xaxis", "yaxis")) and isinstance(layout[key], dict):
            axis = layout[key]
            axis.setdefault("tickfont", {})["size"] = max(FIGURE_PX, axis.get("tickfont", {}).get("size") or 0)
            if isinstance(axis.get("title"), dict):
                axis["title"].setdefault("font", {})["size"] = FIGURE_PX
    for ann in layout.get("annotations", []) or []:
        ann.setdefault("font", {})["size"] = max(FIGURE_PX, (ann.get("font") or {}).get("size") or 0)
    layout.setdefault("font", {})["size"] = FIGURE_PX
    layout.setdefault("legend", {}).setdefault("font", {})["size"] = FIGURE_PX
    layout.setdefault("hoverlabel", {}).setdefault("font", {})["size"] = FIGURE_PX
    top, bottom = margin.get("t", 80), margin.get("b", 80)
    if isinstance(layout.get("title"), dict) and layout["title"].get("text"):
        layout["title"].setdefault("font", {})["size"] = TITLE_PX
        margin["t"] = max(top, int(TITLE_PX * 2.2))
    if layout.get("width"):
        layout["width"] = int(layout["width"] * f)
    if layout.get("height"):
        layout["height"] = int((layout["height"] - top - bottom) * f) + margin.get("t", top) + bottom + 8
    return d
