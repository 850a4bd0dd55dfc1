"""Figures of page 7 (correct → fast): the kernel ladder's times, its sweeps over context_len and block_size, and
the memory-waste story (trace lengths, waste per reservation scheme, requests that fit, internal fragmentation).

Pure builders: numbers in, `go.Figure` out. Values are stored as plain lists so tests can read them back. Every
rung keeps one colour, dash and marker on every figure (Okabe–Ito; the dash tells them apart in grey too).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import plotly.graph_objects as go

from .colors import HIGHLIGHT_COLOR, OKABE_ITO, ink
from .figure import make_figure, title_layout

# rung -> (colour, dash, marker)
IMPL_STYLE = {
    "loop": (OKABE_ITO["vermillion"], "dot", "x"),
    "gather": (OKABE_ITO["orange"], "dash", "square"),
    "fused": (OKABE_ITO["bluish_green"], "solid", "circle"),
    "native": (OKABE_ITO["sky_blue"], "longdashdot", "star"),
    "triton": (OKABE_ITO["reddish_purple"], "dashdot", "diamond"),
    "sdpa": (OKABE_ITO["blue"], "longdash", "triangle-up"),
}
OTHER_STYLE = ("#777777", "solid", "circle")
GRID = "#E5E5E5"
LEGEND_BELOW = dict(orientation="h", y=-0.25, yanchor="top", x=0)


def impl_color(impl: str) -> str:
    return IMPL_STYLE.get(impl, OTHER_STYLE)[0]


def _log_range(values: Sequence[float], pad: float = 0.15) -> list[float]:
    positive = [v for v in values if v and v > 0] or [1.0]
    return [math.log10(min(positive)) - pad, math.log10(max(positive)) + pad]


def _log_ticks(log_range: Sequence[float]) -> dict:
    """Tick values 1, 2, 5 × 10^k inside a log axis range, labelled in plain numbers (0.2, 0.5, 1, 2, 5, 10, …)
    rather than plotly's bare minor digits."""
    lo, hi = log_range
    values = [m * 10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)
              if lo <= math.log10(m * 10.0 ** k) <= hi]
    return dict(tickvals=values, ticktext=[f"{v:g}" for v in values])


def ladder_figure(rows: Sequence[Mapping], title: str = "", x_title: str = "ms") -> go.Figure:
    """One horizontal bar per rung, top to bottom in the order given, on a log time axis.

    rows: dicts with impl, label (y text), ms, ok (bool), x_sdpa (time / contiguous SDPA time). The bar text says
    ✔/✗, the time and the ratio, so the verdict sits next to the number."""
    labels = [r["label"] for r in rows]
    ms = [float(r["ms"]) for r in rows]
    text = [f"{'✔' if r['ok'] else '✗'} {r['ms']:.2f} ms · {r['x_sdpa']:.1f}× SDPA" for r in rows]
    data = [dict(type="bar", orientation="h", y=labels, x=ms, text=text, textposition="outside", cliponaxis=False,
                 marker=dict(color=[impl_color(r["impl"]) for r in rows],
                             line=dict(color=[HIGHLIGHT_COLOR if not r["ok"] else "white" for r in rows], width=2)),
                 hovertext=text, hoverinfo="text", name=x_title, showlegend=False)]
    lo, hi = _log_range(ms)
    x_range = [lo - 0.2, hi + 0.55]  # room on the right for the text
    layout = title_layout(title, 70 + 42 * max(1, len(rows)), bottom=40)
    layout.update(
        xaxis=dict(title=dict(text=x_title), type="log", range=x_range, fixedrange=True, gridcolor=GRID,
                   **_log_ticks(x_range)),
        yaxis=dict(autorange="reversed", fixedrange=True, automargin=True),
        margin=dict(l=10, r=30, t=36 if title else 8, b=40))
    return make_figure(data, layout)


def sweep_figure(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], labels: Mapping[str, str],
                 title: str = "", x_title: str = "", y_title: str = "", log_y: bool = True,
                 ref: float | None = None, ref_label: str = "") -> go.Figure:
    """One line per rung (impl -> (xs, ys)) on a log2 x axis with the sweep's values as ticks; optionally a dashed
    horizontal reference line (the machine's read bandwidth) named `ref_label`."""
    data, xs_all, ys_all = [], set(), []
    for impl, (xs, ys) in series.items():
        color, dash, symbol = IMPL_STYLE.get(impl, OTHER_STYLE)
        name = labels.get(impl, impl)
        xs_all.update(xs)
        ys_all.extend(ys)
        data.append(dict(type="scatter", x=list(xs), y=list(ys), mode="lines+markers", name=name,
                         line=dict(color=color, dash=dash, width=2), marker=dict(color=color, symbol=symbol, size=8),
                         hovertext=[f"{name}, {x_title} {x}: {y:.3g} {y_title}" for x, y in zip(xs, ys)],
                         hoverinfo="text"))
    ticks = sorted(xs_all) or [1]
    if ref is not None:
        ys_all.append(ref)
        data.append(dict(type="scatter", x=[ticks[0], ticks[-1]], y=[ref, ref], mode="lines", name=ref_label,
                         line=dict(color=HIGHLIGHT_COLOR, width=1.5, dash="dash"), hoverinfo="text",
                         hovertext=[f"{ref_label}: {ref:.3g}"] * 2))
    x_pad = 0.15
    layout = title_layout(title, 360, bottom=80)
    yaxis = dict(title=dict(text=y_title), fixedrange=True, gridcolor=GRID)
    if log_y:
        y_range = _log_range(ys_all)
        yaxis.update(type="log", range=y_range, **_log_ticks(y_range))
    else:
        yaxis.update(rangemode="tozero")
    layout.update(
        xaxis=dict(title=dict(text=x_title), type="log", tickvals=ticks, ticktext=[str(t) for t in ticks],
                   range=[math.log10(ticks[0]) - x_pad, math.log10(ticks[-1]) + x_pad], fixedrange=True,
                   showgrid=False),
        yaxis=yaxis, legend=LEGEND_BELOW)
    return make_figure(data, layout)


def trace_figure(final_lens: Sequence[int], max_model_len: int, title: str = "", x_title: str = "",
                 y_title: str = "", max_label: str = "max_model_len", mean_label: str = "mean") -> go.Figure:
    """Histogram of the requests' final lengths, with dashed lines at their mean and at max_model_len (what a
    contiguous server reserves for every one of them)."""
    mean = sum(final_lens) / max(1, len(final_lens))
    data = [dict(type="histogram", x=list(final_lens), nbinsx=40, name=x_title, showlegend=False,
                 marker=dict(color=OKABE_ITO["sky_blue"], line=dict(color="white", width=0.5)))]
    shapes, notes = [], []
    for x, label, color in ((mean, f"{mean_label} {mean:.0f}", OKABE_ITO["blue"]),
                            (max_model_len, f"{max_label} {max_model_len}", OKABE_ITO["vermillion"])):
        shapes.append(dict(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", line=dict(color=color, dash="dash")))
        notes.append(dict(x=x, y=1, yref="paper", text=label, showarrow=False, xanchor="right", yanchor="bottom",
                          font=dict(color=ink(color), size=12)))  # as text: AA contrast
    layout = title_layout(title, 320, top=48, bottom=40)
    layout.update(shapes=shapes, annotations=notes, bargap=0.05,
                  xaxis=dict(title=dict(text=x_title), range=[0, max_model_len * 1.04], fixedrange=True,
                             showgrid=False),
                  yaxis=dict(title=dict(text=y_title), fixedrange=True, gridcolor=GRID))
    return make_figure(data, layout)


def _scheme_colors(kinds: Sequence[str]) -> list[str]:
    palette = {"max_len": OKABE_ITO["vermillion"], "oracle": "#999999", "paged": OKABE_ITO["bluish_green"]}
    return [palette.get(k, "#777777") for k in kinds]


def pct_label(value: float) -> str:
    """A percentage as a bar label of at most three characters: one decimal below 10 ("0.4", "9.9"), whole from
    there ("13", "79", "100")."""
    return f"{value:.1f}" if round(value, 1) < 10 else f"{value:.0f}"


def waste_figure(labels: Sequence[str], final_pct: Sequence[float], decode_pct: Sequence[float], title: str = "",
                 y_title: str = "%", final_name: str = "final", decode_name: str = "decode") -> go.Figure:
    """Waste % per reservation scheme, two bars each: at the final length and averaged over decode steps. A bar's
    label has at most three characters (`pct_label`), so two neighbours' labels do not touch at 1024 px; the hover
    gives one decimal."""
    hover = "%{x}, %{fullData.name}: %{y:.1f}<extra></extra>"
    data = [dict(type="bar", x=list(labels), y=list(final_pct), name=final_name, marker=dict(color=OKABE_ITO["blue"]),
                 text=[pct_label(v) for v in final_pct], textposition="outside", cliponaxis=False,
                 hovertemplate=hover),
            dict(type="bar", x=list(labels), y=list(decode_pct), name=decode_name,
                 marker=dict(color=OKABE_ITO["orange"], pattern=dict(shape="/")),
                 text=[pct_label(v) for v in decode_pct], textposition="outside", cliponaxis=False,
                 hovertemplate=hover)]
    layout = title_layout(title, 360, bottom=80)
    layout.update(barmode="group", legend=LEGEND_BELOW,
                  xaxis=dict(type="category", fixedrange=True, tickangle=0, automargin=True, tickfont=dict(size=11)),
                  yaxis=dict(title=dict(text=y_title), range=[0, 105], fixedrange=True, gridcolor=GRID))
    return make_figure(data, layout)


def fit_figure(labels: Sequence[str], kinds: Sequence[str], fit: Sequence[int], title: str = "",
               y_title: str = "") -> go.Figure:
    """Requests that fit the KV budget at once, one bar per scheme (coloured by kind: max_len, oracle, paged)."""
    data = [dict(type="bar", x=list(labels), y=list(fit), marker=dict(color=_scheme_colors(kinds)),
                 text=[str(v) for v in fit], textposition="outside", cliponaxis=False, name=y_title,
                 showlegend=False)]
    layout = title_layout(title, 320, top=40, bottom=40)
    layout.update(xaxis=dict(type="category", fixedrange=True, tickangle=0, automargin=True, tickfont=dict(size=11)),
                  yaxis=dict(title=dict(text=y_title), range=[0, max(list(fit) + [1]) * 1.15], fixedrange=True,
                             gridcolor=GRID))
    return make_figure(data, layout)


def fragmentation_figure(block_sizes: Sequence[int], spare_per_request: Sequence[float], title: str = "",
                         x_title: str = "block_size", y_title: str = "", measured_name: str = "measured",
                         expected_name: str = "(block_size - 1) / 2") -> go.Figure:
    """Internal fragmentation: spare slots per request in its last block, measured on the trace, next to
    (block_size - 1) / 2, what a uniformly filled last block leaves on average. Log x axis, linear y."""
    expected = [(b - 1) / 2 for b in block_sizes]
    color = OKABE_ITO["bluish_green"]
    data = [dict(type="scatter", x=list(block_sizes), y=list(spare_per_request), mode="lines+markers",
                 name=measured_name, line=dict(color=color, width=2), marker=dict(color=color, size=8),
                 hovertext=[f"block_size {b}: {v:.1f}" for b, v in zip(block_sizes, spare_per_request)],
                 hoverinfo="text"),
            dict(type="scatter", x=list(block_sizes), y=expected, mode="lines", name=expected_name,
                 line=dict(color=HIGHLIGHT_COLOR, width=1.5, dash="dash"), hoverinfo="skip")]
    layout = title_layout(title, 320, bottom=80)
    layout.update(
        xaxis=dict(title=dict(text=x_title), type="log", tickvals=list(block_sizes),
                   ticktext=[str(b) for b in block_sizes], fixedrange=True, showgrid=False),
        yaxis=dict(title=dict(text=y_title), rangemode="tozero", fixedrange=True, gridcolor=GRID),
        legend=LEGEND_BELOW)
    return make_figure(data, layout)
