"""Helpers for the figure tests (tests/viz/): find a plotly trace (one series of a figure, not a StepTrace) by
name. Those tests also use conftest's `validate_figures` fixture, so an invalid plotly property fails there rather
than in the browser."""

from __future__ import annotations


def trace(fig, name: str):
    """The plotly trace of `fig` named `name` (asserts there is one, listing the names there are)."""
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace named {name!r} in {[t.name for t in fig.data]}"
    return found[0]
