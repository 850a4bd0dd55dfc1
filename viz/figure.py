"""One way to turn plain trace/layout dicts into a figure, fast.

Plotly validates every property on construction and deep-copies the data, which is ~90% of the cost of building
these figures (~3 ms a figure here even without validation) and would dominate a page's server time. The builders
are tested with validation on (PAGED_VALIDATE_FIGURES=1, as the figure tests set it: a real `go.Figure`); the app
gets a `SpecFigure`, which keeps the builder's dicts as they are and becomes a `go.Figure` only if asked for more
than its dicts.
"""

from __future__ import annotations

import copy
import functools
import os

import plotly.graph_objects as go
import plotly.io as pio


class SpecFigure:
    """A figure held as the builder's plain dicts: `_data` (trace dicts) and `_layout` (a dict), the same two
    attributes a go.Figure keeps (what ui.fit.figure_spec reads), and `to_dict()` (a deep copy).

    Any other attribute (`.data`, `.layout`, `.update_layout`, …) builds the go.Figure once (unvalidated) and
    answers from it; from then on `_data` / `_layout` are that figure's own, so a change made through it is seen."""

    def __init__(self, data: list[dict], layout: dict):
        self._data, self._layout, self._figure = data, layout, None

    @property
    def figure(self) -> go.Figure:
        """The go.Figure of these dicts, built on first use."""
        if self._figure is None:
            fig = go.Figure(data=self._data, layout=self._layout, _validate=False)
            self._figure, self._data, self._layout = fig, fig._data, fig._layout
        return self._figure

    def to_dict(self) -> dict:
        """{"data": [...], "layout": {...}}, deep-copied (free to change)."""
        return copy.deepcopy({"data": self._data, "layout": self._layout})

    def to_plotly_json(self) -> dict:
        return self.to_dict()

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_figure", "_data", "_layout"):
            raise AttributeError(name)
        return getattr(self.figure, name)


@functools.lru_cache(maxsize=8)
def template_dict(name: str) -> dict:
    """Plotly template `name` as the plain dict a go.Figure would carry in layout.template (shared: not to change)."""
    return copy.deepcopy(pio.templates[name].to_plotly_json())


def make_figure(data: list[dict], layout: dict) -> go.Figure | SpecFigure:
    """The figure of `data` (trace dicts, used as given: not copied) and `layout`: a validated go.Figure when
    PAGED_VALIDATE_FIGURES=1, else a SpecFigure (no copy, no validation) carrying plotly's default template (the
    one Streamlit sets) in layout.template, as a go.Figure would."""
    if os.environ.get("PAGED_VALIDATE_FIGURES", "") == "1":
        return go.Figure(data=data, layout=layout)
    default = pio.templates.default
    if default and default != "none" and "template" not in layout:
        layout["template"] = template_dict(default)
    return SpecFigure(data, layout)


def title_layout(title: str, height: int, top: int = 36, bottom: int = 10) -> dict:
    """The layout every figure here shares: white plot, small margins, a left-aligned title when given."""
    return dict(title=dict(text=title, x=0, font=dict(size=14)) if title else None, height=height,
                margin=dict(l=10, r=10, t=top if title else 8, b=bottom), plot_bgcolor="white")
