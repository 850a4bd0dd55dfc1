"""Engine figures: cached_token_count over time against the state rule, and the paged vs contiguous twins' logits
difference per step (the scheduler's queues and one step's slot_mapping are HTML: viz.cells). One colour and label per sequence, as in the
pool grid (colors.seq_color / seq_label)."""

from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go

from .cells import twin_bars
from .colors import seq_color, seq_label
from .figure import make_figure, title_layout

def integer_dtick(last: int) -> int:
    """A whole-number tick step giving about 10 ticks up to `last`."""
    return max(1, -(-last // 10))


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
    bars = twin_bars(steps, diffs, agree, tolerance)
    colors, shown, hover = ([b[k] for b in bars] for k in ("color", "shown", "hover"))
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

