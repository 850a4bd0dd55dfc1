"""Bug lab figures: per-step error lines on a log axis with the tolerance line and drift stars; the pool grid with
the cells a fault wrote (black squares) or read (blue circles) wrongly. Built with plotly's validation on."""

from __future__ import annotations

import pytest

from lessons.buglab_tensors import BadCell
from viz.buglab import FLOOR, READ_COLOR, BadCellWords, bad_cells_figure, step_error_figure
from viz.colors import HIGHLIGHT_COLOR, seq_color
from viz_util import trace

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on

TABLES = {0: [7, 2, 9], 1: [4, 1], 2: [8, 5, 3, 6]}
LENS = {0: 10, 1: 6, 2: 15}


def test_step_error_lines_log_axis_tolerance_and_stars():
    """One line per sequence in its colour; zeros drawn at the floor (hover says 0); a step a sequence sat out is a
    gap, and its line ends at its last step; the tolerance is a dashed line across all steps; a star at each first
    drift."""
    values = [{0: 0.0, 1: 1e-7}, {0: 2e-7, 1: 0.5}, {1: 0.9}, {0: 0.3, 1: 0.9}, {1: 0.8}]
    fig = step_error_figure([1, 2, 3, 4, 5], values, 1e-5, drift_steps={1: 2, 0: None}, tol_label="tol")
    assert fig.layout.yaxis.type == "log"
    a, b = trace(fig, "A"), trace(fig, "B")
    assert list(a.x) == [1, 2, 3, 4] and list(a.y) == [FLOOR, 2e-7, None, 0.3] and not a.connectgaps
    assert a.hovertext[0].endswith(": 0") and a.hovertext[2].endswith("—")  # A sat out step 3 (preempted)
    assert list(b.x) == [1, 2, 3, 4, 5] and b.line.color == seq_color(1)
    tol = trace(fig, "tol")
    assert list(tol.y) == [1e-5, 1e-5] and tol.line.dash == "dash" and tol.x[0] < 1 and tol.x[1] > 5
    star = trace(fig, "first drift")
    assert list(star.x) == [2] and list(star.y) == [0.5] and star.marker.symbol == "star"
    assert fig.layout.yaxis.range[1] > 0  # the top of the axis clears the largest error (0.9)


def test_step_error_without_drift_hides_the_star_legend():
    fig = step_error_figure([0, 1], [{0: 0.0}, {0: 1e-9}], 1e-4)
    assert not trace(fig, "first drift").showlegend and list(trace(fig, "first drift").x) == []


def test_bad_cells_marks_writes_and_reads_with_hover():
    """A wrong write outlines the slot it landed on (black square), a wrong read circles the slot read (blue), a
    skipped read circles the slot it should have read; hover says whose token and where it was meant to go."""
    writes = [BadCell("write", 0, 0, 29, 28), BadCell("write", 1, -1, 47, -1)]
    reads = [BadCell("read", 2, 3, 33, 35), BadCell("skipped", 1, 6, -1, 6)]
    fig = bad_cells_figure(12, 4, TABLES, LENS, writes, reads, words=BadCellWords(written_wrongly="W", read_wrongly="R"))
    w, r = trace(fig, "W"), trace(fig, "R")
    assert list(w.customdata) == [29, 47] and w.marker.color == HIGHLIGHT_COLOR and w.showlegend
    assert "A token 0" in w.hovertext[0] and "meant slot 28" in w.hovertext[0]
    assert "padding row" in w.hovertext[1] and "nowhere" in w.hovertext[1]
    assert list(r.customdata) == [6, 33] and r.marker.symbol == "circle-open" and r.marker.color == READ_COLOR
    assert "not read at all" in r.hovertext[0] and "C token 3" in r.hovertext[1]
    worded = trace(bad_cells_figure(12, 4, TABLES, LENS, writes, reads, words=BadCellWords(token="{token}@{seq}")),
                   "read wrongly")
    assert worded.hovertext[1].startswith("3@C: ")  # a page's word for whose token it is


def test_bad_cells_without_damage_is_the_plain_pool():
    """Fault off: no marks and no legend entries for them."""
    fig = bad_cells_figure(12, 4, TABLES, LENS, title="pool")
    assert list(trace(fig, "written wrongly").x) == [] and not trace(fig, "written wrongly").showlegend
    assert list(trace(fig, "read wrongly").x) == [] and not trace(fig, "read wrongly").showlegend
    assert {t.name for t in fig.data} >= {"A", "B", "C", "free"}


def test_read_before_write_is_described():
    fig = bad_cells_figure(12, 4, TABLES, LENS, bad_reads=[BadCell("read", 0, 10, 38, 38)])
    assert "read before it was written" in trace(fig, "read wrongly").hovertext[0]
