"""ui.show_figure sends a figure as plotly itself would (same JSON, its title moved above it as text) without
plotly's deep copy of the figure (go.Figure.to_dict), and leaves the figure it was given unchanged."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
from streamlit.testing.v1 import AppTest

from ui.fit import take_title


def page() -> None:
    import streamlit as st

    from ui.widgets import show_figure
    from viz.sharing import memory_figure
    from viz.pool import pool_figure

    figs = [pool_figure(12, 4, {0: [7, 2, 9], 1: [4, 1]}, {0: 10, 1: 6}, highlight=[9], title="Pool<br>two lines"),
            memory_figure([0, 1, 2], [0, 10, 12], [0, 10, 20], 64, title="memory")]
    for i, fig in enumerate(figs):
        show_figure(fig, f"fig{i}")
    st.session_state["figs"] = figs


def expected(fig: go.Figure) -> tuple[str, dict]:
    """Plotly's own JSON of a copy of the figure, its title taken out through the go.Figure API."""
    copy = go.Figure(fig.to_dict())
    title = take_title(copy)
    return title, json.loads(pio.to_json(copy, validate=False))


def test_sent_json_is_plotlys_own_and_the_figure_is_unchanged():
    at = AppTest.from_function(page).run()
    assert not at.exception, [e.value for e in at.exception]
    sent = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    shown = [m.value for m in at.markdown if "paged-figure-title" in m.value]
    figs = at.session_state["figs"]
    assert len(sent) == len(shown) == len(figs) == 2
    for fig, spec, text in zip(figs, sent, shown):
        assert fig.layout.title.text  # the caller's figure keeps its title
        title, want = expected(fig)
        assert spec == want and not (spec["layout"].get("title") or {}).get("text")
        assert all(line in text for line in title.split("<br>"))


def test_no_deep_copy_of_the_figure(monkeypatch):
    def forbidden(self):
        raise AssertionError("go.Figure.to_dict deep-copies the figure: not on the app's path")

    monkeypatch.setattr(go.Figure, "to_dict", forbidden)
    at = AppTest.from_function(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 2


def test_app_figures_are_plain_dicts_with_plotlys_json(monkeypatch):
    """Outside the figure tests a builder returns a SpecFigure (no go.Figure built, no copy): what it holds is the
    JSON plotly makes of the same builder's go.Figure, default template included."""
    from viz.sharing import memory_figure
    from viz.figure import SpecFigure
    from viz.pool import pool_figure

    def both(build):
        monkeypatch.setenv("PAGED_VALIDATE_FIGURES", "1")
        real = build()
        monkeypatch.delenv("PAGED_VALIDATE_FIGURES")
        return real, build()

    for build in (lambda: pool_figure(12, 4, {0: [7, 2, 9]}, {0: 10}, highlight=[9], title="pool"),
                  lambda: memory_figure([0, 1, 2], [0, 10, 12], [0, 10, 20], 64, title="memory")):
        real, light = both(build)
        assert isinstance(real, go.Figure) and isinstance(light, SpecFigure)
        assert json.loads(json.dumps(light.to_dict())) == json.loads(pio.to_json(real, validate=False))
        assert light.layout.title.text == real.layout.title.text  # anything else: the go.Figure, built on demand


def test_breakable_wraps_identifiers_only_between_their_parts_and_escapes_the_rest():
    """A test's name may wrap after / :: _ (a <wbr>) and nowhere else; HTML and markdown characters stay text."""
    from ui.widgets import breakable

    out = breakable("tests/paged/test_a.py::test_b <i>x</i> *y* `z`")
    assert out.replace("<wbr>", "").replace("\\", "") == ("tests/paged/test_a.py::test_b &lt;i&gt;x&lt;/i&gt; *y* `z`")
    assert out.split("<wbr>") == ["tests/", "paged/", "test\\_", "a.py::", "test\\_", "b &lt;i&gt;x&lt;/",
                                  "i&gt; \\*y\\* \\`z\\`"]
