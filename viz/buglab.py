"""Bug lab figures: how far the paged side drifts from its contiguous twin per step (log scale, tolerance line),
and the pool grid with the cells a fault wrote or read wrongly.

Pure builders: numbers in, `go.Figure` out (values as plain lists, so tests can read them back).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

import plotly.graph_objects as go

from .colors import HIGHLIGHT_COLOR, OKABE_ITO, seq_color, seq_label
from .figure import make_figure, title_layout
from .pool import PoolWords, pool_figure

FLOOR = 1e-10  # an exact zero cannot sit on a log axis: drawn here, hover says "0"
READ_COLOR = OKABE_ITO["blue"]


def step_error_figure(steps: Sequence[int], values: Sequence[Mapping[int, float]], tol: float, title: str = "",
                      x_title: str = "step", y_title: str = "", tol_label: str = "tolerance",
                      drift_steps: Mapping[int, int | None] | None = None, drift_label: str = "first drift",
                      labels: Mapping[int, str] | None = None, floor: float = FLOOR) -> go.Figure:
    """One line per sequence of a per-step error on a log axis, with the tolerance as a dashed line.

    steps[i] is the x of values[i] (seq_id -> error; a sequence absent from a step leaves a gap). Errors
    below `floor` (exact zeros) are drawn at `floor`. drift_steps: seq_id -> the step where its output first
    differs, marked with a star. Traces: one per sequence (named by its label), "tolerance", "first drift".
    """
    labels = dict(labels or {})
    name = lambda s: labels.get(s, seq_label(s))  # noqa: E731
    seq_ids = sorted({s for row in values for s in row})
    data, top = [], max(tol, floor)
    for seq_id in seq_ids:
        # from its first to its last step; a step it sat out (waiting, preempted) is a gap in the line
        present = [i for i, row in enumerate(values) if seq_id in row]
        span = range(present[0], present[-1] + 1)
        xs = [steps[i] for i in span]
        ys = [values[i].get(seq_id) for i in span]
        top = max([top] + [y for y in ys if y is not None])
        data.append(dict(
            type="scatter", x=xs, y=[None if y is None else max(y, floor) for y in ys], mode="lines+markers",
            name=name(seq_id), connectgaps=False, line=dict(color=seq_color(seq_id), width=2),
            marker=dict(color=seq_color(seq_id), size=6), hoverinfo="text",
            hovertext=[f"{name(seq_id)}, {x_title} {x}: " + ("—" if y is None else f"{y:.2e}" if y > 0 else "0")
                       for x, y in zip(xs, ys)]))
    x_lo, x_hi = (min(steps), max(steps)) if steps else (0, 1)
    data.append(dict(type="scatter", x=[x_lo - 0.5, x_hi + 0.5], y=[tol, tol], mode="lines", name=tol_label,
                     line=dict(color=HIGHLIGHT_COLOR, width=1.5, dash="dash"), hoverinfo="text",
                     hovertext=[f"{tol_label}: {tol:.0e}"] * 2))
    drift = [(s, x) for s, x in (drift_steps or {}).items() if x is not None]
    at = {(s, x): row[s] for x, row in zip(steps, values) for s in row}
    data.append(dict(
        type="scatter", x=[x for _, x in drift], y=[max(at.get((s, x), floor), floor) for s, x in drift],
        mode="markers", name=drift_label, showlegend=bool(drift), hoverinfo="text",
        hovertext=[f"{name(s)}: {drift_label} ({x_title} {x})" for s, x in drift],
        marker=dict(symbol="star", size=15, color=[seq_color(s) for s, _ in drift],
                    line=dict(width=1.5, color=HIGHLIGHT_COLOR))))
    layout = title_layout(title, 330, bottom=70)
    exp_hi = math.ceil(math.log10(top)) + 0.3
    layout.update(
        xaxis=dict(title=dict(text=x_title), range=[x_lo - 0.5, x_hi + 0.5], fixedrange=True,
                   dtick=max(1, (x_hi - x_lo) // 12), showgrid=False),
        yaxis=dict(title=dict(text=y_title), type="log", exponentformat="power", fixedrange=True,
                   range=[math.log10(floor) - 0.3, exp_hi], gridcolor="#E5E5E5"),
        legend=dict(orientation="h", y=-0.22, yanchor="top", x=0))  # below the axis: clear of the title
    return make_figure(data, layout)


@dataclass(frozen=True)
class BadCellWords:
    """The wording of bad_cells_figure's hover and legend (English by default; a page passes its language's, from
    ui/strings). A hover line is "<token>: <write|read> slot 5, <meant> slot 4" (or "<token>: <skipped> (slot 4)",
    "<token>: <early> (slot 4)"); token {seq} {token} names whose token, padding {seq} a padding row copied from
    {seq}'s; nowhere stands for slot -1; written_wrongly / read_wrongly name the two marks in the legend."""

    write: str = "written at"
    read: str = "read from"
    skipped: str = "not read at all"
    early: str = "read before it was written"
    written_wrongly: str = "written wrongly"
    read_wrongly: str = "read wrongly"
    meant: str = "meant"
    nowhere: str = "nowhere (slot −1)"
    padding: str = "padding row (a copy of {seq}'s row)"
    token: str = "{seq} token {token}"


def _cell_lines(cells, what: BadCellWords) -> dict[int, list[str]]:
    """slot -> hover lines for the cells a fault touched (a skipped read is drawn at the slot it should have
    read)."""
    lines: dict[int, list[str]] = defaultdict(list)
    for c in cells:
        who = (what.token.format(seq=seq_label(c.seq_id), token=c.token_index) if c.token_index >= 0
               else what.padding.format(seq=seq_label(c.seq_id)))
        if c.kind == "skipped":
            lines[c.meant].append(f"{who}: {what.skipped} (slot {c.meant})")
        elif c.kind == "read" and c.slot == c.meant:
            lines[c.slot].append(f"{who}: {what.early} (slot {c.slot})")
        else:
            meant = f"slot {c.meant}" if c.meant >= 0 else what.nowhere
            lines[c.slot].append(f"{who}: {getattr(what, c.kind)} slot {c.slot}, {what.meant} {meant}")
    return lines


def bad_cells_figure(num_blocks: int, block_size: int, tables: Mapping[int, Sequence[int]],
                     cached_counts: Mapping[int, int], bad_writes: Sequence = (), bad_reads: Sequence = (),
                     title: str = "", words: BadCellWords = BadCellWords(),
                     pool_words: PoolWords = PoolWords()) -> go.Figure:
    """The pool grid (cells coloured by the correct owner and token) with a fault's damage on top: a black square
    inside each cell written wrongly, a blue circle in each cell read wrongly.

    bad_writes / bad_reads: objects with kind, seq_id, token_index, slot, meant (lessons.buglab_tensors.BadCell).
    words: the hover / legend wording (BadCellWords), for translation; pool_words: the pool's own (PoolWords).
    Traces: those of pool_figure, with "highlight" renamed words.written_wrongly and "read" renamed
    words.read_wrongly.
    """
    what = words
    write_lines = _cell_lines(bad_writes, what)
    read_lines = _cell_lines(bad_reads, what)
    write_slots, read_slots = sorted(write_lines), sorted(s for s in read_lines if s >= 0)
    fig = pool_figure(num_blocks, block_size, tables, cached_counts, highlight=write_slots, read=read_slots,
                      title=title, words=pool_words)
    size = fig.data[0].marker.size if fig.data and fig.data[0].marker.size else 20
    fig.update_traces(selector=dict(name="highlight"), name=what.written_wrongly, showlegend=bool(write_slots),
                      hovertext=["<br>".join(write_lines[s]) for s in write_slots], hoverinfo="text",
                      marker=dict(symbol="square-open", color=HIGHLIGHT_COLOR, size=max(6, size - 3),
                                  line=dict(width=3, color=HIGHLIGHT_COLOR)))  # inset: neighbours stay apart
    fig.update_traces(selector=dict(name="read"), name=what.read_wrongly, showlegend=bool(read_slots),
                      hovertext=["<br>".join(read_lines[s]) for s in read_slots], hoverinfo="text",
                      marker=dict(symbol="circle-open", color=READ_COLOR, size=max(6, int(size * 0.8)),
                                  line=dict(width=2.5, color=READ_COLOR)))
    return fig
