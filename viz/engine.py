"""Engine figures: the scheduler's queues, one step's slot_mapping, cached_token_count over time against the state
rule, and the paged vs contiguous twins' logits difference per step. One colour and label per sequence, as in the
pool grid (colors.seq_color / seq_label)."""

from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go

from .colors import OKABE_ITO, seq_color, seq_label, text_color
from .figure import make_figure, title_layout

LANES = ("waiting", "running", "finished")


def integer_dtick(last: int) -> int:
    """A whole-number tick step giving about 10 ticks up to `last`."""
    return max(1, -(-last // 10))


def queues_figure(waiting: Sequence[int], running: Sequence[int], finished: Sequence[int],
                  preempted: Sequence[int] = (), scheduled: Sequence[int] = (), title: str = "",
                  lane_names: Sequence[str] = LANES) -> go.Figure:
    """Three lanes of sequence squares (label printed, coloured per sequence). Sequences scheduled this step get a
    thick black outline; preempted ones (back at the front of waiting) a dashed circle.
    Traces: one per lane, named "waiting" / "running" / "finished", then "scheduled" and "preempted"."""
    data, pos = [], {}
    for lane, (name, ids) in enumerate(zip(LANES, (waiting, running, finished))):
        ids = list(ids)
        colors = [seq_color(s) for s in ids]
        for i, s in enumerate(ids):
            pos[s] = (i, lane)
        data.append(dict(type="scatter", name=name, x=list(range(len(ids))), y=[lane] * len(ids),
                         mode="markers+text", text=[seq_label(s) for s in ids],
                         textfont=dict(size=12, color=[text_color(c) for c in colors]),
                         hovertext=[f"{seq_label(s)} (seq {s}): {lane_names[lane]}" for s in ids], hoverinfo="text",
                         marker=dict(symbol="square", size=26, color=colors, line=dict(width=1, color="#333333")),
                         showlegend=False))
    for name, ids, symbol, width in (("scheduled", scheduled, "square-open", 3),
                                     ("preempted", preempted, "circle-open", 2)):
        pts = [pos[s] for s in ids if s in pos]
        data.append(dict(type="scatter", name=name, x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers",
                         marker=dict(symbol=symbol, size=34, color="#000000", line=dict(width=width)),
                         hoverinfo="skip", showlegend=False))
    longest = max(len(waiting), len(running), len(finished), 8)
    layout = title_layout(title, 150, bottom=6)
    layout.update(showlegend=False,
                  xaxis=dict(visible=False, range=[-0.7, longest - 0.3], fixedrange=True),
                  yaxis=dict(range=[2.6, -0.6], fixedrange=True, tickvals=[0, 1, 2], ticktext=list(lane_names),
                             showgrid=False, zeroline=False))
    return make_figure(data, layout)


def slot_mapping_figure(entries: Sequence[tuple[int, Sequence[int], Sequence[int]]], block_size: int,
                        title: str = "", max_cols: int = 24, min_width: int = 660) -> go.Figure:
    """One step's slot_mapping: entries are (seq_id, positions, slots) in feed order; each fed token is a cell
    coloured by its sequence with its slot printed (-1 = skipped), rows of at most `max_cols` cells per sequence.
    Hover: token position → logical block, offset → slot → physical block. Traces: one per sequence (its label)."""
    data, ticks, labels, row = [], [], [], 0
    widest = 1
    for seq_id, positions, slots in entries:
        label, color = seq_label(seq_id), seq_color(seq_id)
        xs, ys, text, hover = [], [], [], []
        for i, (p, s) in enumerate(zip(positions, slots)):
            r, c = divmod(i, max_cols)
            xs.append(c)
            ys.append(row + r)
            text.append(str(s))
            where = (f"physical block {s // block_size}, offset {s % block_size}" if s >= 0 else "skipped")
            hover.append(f"{label} token {p} → logical block {p // block_size}, offset {p % block_size} → "
                         f"slot {s} ({where})")
        n_rows = max(1, -(-len(positions) // max_cols))
        widest = max(widest, min(len(positions), max_cols))
        ticks.append(row)
        labels.append(label)
        data.append(dict(type="scatter", name=label, x=xs, y=ys, mode="markers+text", text=text,
                         textfont=dict(size=9, color=text_color(color)), hovertext=hover, hoverinfo="text",
                         marker=dict(symbol="square", size=24, color=color, line=dict(width=0.5, color="#333333")),
                         showlegend=False))
        row += n_rows
    rows = max(row, 1)
    top = 36 if title else 8
    width = max(min_width, 60 + 27 * widest)  # wide enough for the title; the x range grows, never the cells
    layout = title_layout(title, top + 30 * rows + 12, top=top)
    layout.update(width=width, showlegend=False,
                  xaxis=dict(visible=False, range=[-0.6, -0.6 + (width - 60) / 27], fixedrange=True),
                  yaxis=dict(range=[rows - 0.5, -0.5], fixedrange=True, tickvals=ticks, ticktext=labels,
                             showgrid=False, zeroline=False))
    return make_figure(data, layout)


def cache_rule_figure(series: Mapping[int, Mapping[str, Sequence[int]]], title: str = "",
                      cached_name: str = "cached_token_count", rule_name: str = "prompt_len + generated − 1",
                      x_title: str = "step", y_title: str = "tokens") -> go.Figure:
    """Per sequence: cached_token_count after each step (markers + line) and the state rule prompt_len +
    generated − 1 (dotted), same colour. They coincide after every step that ran the sequence; a preempted one drops
    to 0 until its recompute. series: seq_id -> {"step", "cached", "rule"}. Traces: "<label> cached", "<label> rule"."""
    data = []
    for seq_id, d in series.items():
        label, color = seq_label(seq_id), seq_color(seq_id)
        data.append(dict(type="scatter", name=f"{label} rule", legendgroup=label, x=list(d["step"]),
                         y=list(d["rule"]), mode="lines", line=dict(color=color, width=2, dash="dot"),
                         hovertemplate=f"{label} step %{{x}}: {rule_name} = %{{y}}<extra></extra>",
                         showlegend=False))
        data.append(dict(type="scatter", name=f"{label} cached", legendgroup=label, x=list(d["step"]),
                         y=list(d["cached"]), mode="lines+markers", line=dict(color=color, width=1.5),
                         marker=dict(size=6, color=color, symbol="circle"),
                         hovertemplate=f"{label} step %{{x}}: {cached_name} = %{{y}}<extra></extra>"))
    last = max((max(d["step"], default=0) for d in series.values()), default=0)
    layout = title_layout(title, 330, bottom=75)
    layout.update(legend=dict(orientation="h", y=-0.3, yanchor="top", x=0),
                  xaxis=dict(title=dict(text=x_title), gridcolor="#E5E5E5", range=[-0.3, max(last, 5) + 0.3],
                             dtick=integer_dtick(max(last, 5))),
                  yaxis=dict(title=dict(text=y_title), gridcolor="#E5E5E5", rangemode="tozero"))
    return make_figure(data, layout)


def twin_diff_figure(steps: Sequence[int], diffs: Sequence[float], agree: Sequence[bool], tolerance: float,
                     title: str = "", x_title: str = "step", y_title: str = "max |Δlogits|") -> go.Figure:
    """Per step, the largest |paged − contiguous| logit difference (log scale; an exact 0 is drawn at the floor)
    and a dashed line at `tolerance`. Bars are blue when the tokens agreed and the diff is within tolerance,
    vermillion otherwise. Traces: "max diff", "tolerance"."""
    floor = min(tolerance * 1e-5, 1e-9)
    ok = [a and d <= tolerance for a, d in zip(agree, diffs)]
    colors = [OKABE_ITO["blue"] if k else OKABE_ITO["vermillion"] for k in ok]
    shown = [max(d, floor) for d in diffs]
    hover = [f"step {s}: {d:.2e} {'✔' if k else '✗'}" for s, d, k in zip(steps, diffs, ok)]
    xs = list(steps) or [0]
    data = [dict(type="bar", name="max diff", x=list(steps), y=shown, marker=dict(color=colors),
                 hovertext=hover, hoverinfo="text"),
            dict(type="scatter", name="tolerance", x=[min(xs) - 0.5, max(xs) + 0.5], y=[tolerance, tolerance],
                 mode="lines", line=dict(color="#000000", dash="dash", width=1), hoverinfo="skip")]
    last = max(xs + [10])
    layout = title_layout(title, 240, bottom=40)
    layout.update(showlegend=False, bargap=0.2,
                  xaxis=dict(title=dict(text=x_title), fixedrange=True, range=[0.4, last + 0.6],
                             dtick=integer_dtick(last)),
                  yaxis=dict(title=dict(text=y_title), type="log", fixedrange=True, exponentformat="e",
                             range=[-10, 0], gridcolor="#E5E5E5"))
    return make_figure(data, layout)

