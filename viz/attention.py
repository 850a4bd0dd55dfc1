"""Attention figures: weights (heads × tokens), the logical K/V strip being gathered, the causal mask of prefill,
and diverging heatmaps (outputs, paged − contiguous diffs) centred at zero.

Inputs may be nested lists or tensors/arrays (converted with .tolist(), so figures hold plain lists)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import plotly.graph_objects as go

from .colors import DIVERGING_SCALE, FREE_COLOR, HIGHLIGHT_COLOR, seq_color, text_color
from .figure import make_figure, title_layout

WEIGHT_SCALE = "Viridis"  # sequential, colour-blind safe


def _lists(x) -> list:
    return x.tolist() if hasattr(x, "tolist") else [list(r) if isinstance(r, (list, tuple)) else r for r in x]


ROW_PX = 28  # a heatmap row: room for a 16 px label on every row (presenter mode), so none is skipped


def _heatmap_layout(title: str, height: int, x_title: str, y_title: str, y: Sequence[str] = ()) -> dict:
    """Axes of a heatmap; its row labels `y` are all named where each row has room for one (>= 20 px), none left
    out by plotly's auto ticks; more rows than that keep plotly's choice."""
    layout = title_layout(title, height)
    fits = 0 < len(y) and len(y) * 20 <= height - 90
    named = dict(tickmode="array", tickvals=list(y), ticktext=list(y)) if fits else {}
    layout.update(xaxis=dict(title=dict(text=x_title), fixedrange=True),
                  yaxis=dict(title=dict(text=y_title), fixedrange=True, autorange="reversed", **named))
    return layout


def _rows_height(rows: int, most: int) -> int:
    return min(most, 90 + ROW_PX * rows)


def weights_figure(weights, title: str = "", y_labels: Sequence[str] | None = None, x_title: str = "token_index",
                   y_title: str = "head", weight: str = "weight") -> go.Figure:
    """Heatmap of attention weights [rows, tokens] (rows = heads for decode, queries for prefill), 0 … max;
    `weight`: the hover's word for a weight (e.g. "h0, token 3: weight 0.2500")."""
    z = _lists(weights)
    rows, cols = len(z), len(z[0]) if z else 0
    y = list(y_labels) if y_labels is not None else [f"h{i}" for i in range(rows)]
    trace = dict(type="heatmap", z=z, x=list(range(cols)), y=y, colorscale=WEIGHT_SCALE, zmin=0,
                 colorbar=dict(thickness=10, len=1, nticks=4),
                 hovertemplate="%{y}, token %{x}: " + weight + " %{z:.4f}<extra></extra>")
    return make_figure([trace], _heatmap_layout(title, _rows_height(rows, 520), x_title, y_title, y))


def diverging_figure(values, title: str = "", y_labels: Sequence[str] | None = None, x_title: str = "",
                     y_title: str = "", height: int | None = None) -> go.Figure:
    """Heatmap on a diverging scale centred at 0 and symmetric (zmin = -zmax), for outputs and diffs. An all-zero
    input is drawn white on a ±1e-12 scale rather than a degenerate one."""
    z = _lists(values)
    rows = len(z)
    peak = max((abs(v) for row in z for v in row), default=0.0) or 1e-12
    y = list(y_labels) if y_labels is not None else [f"h{i}" for i in range(rows)]
    # three colour-bar ticks, −peak, 0, +peak: on a short bar plotly's own ticks overlap at a projector's font size
    ticks = [-peak, 0.0, peak]
    trace = dict(type="heatmap", z=z, y=y, colorscale=DIVERGING_SCALE, zmid=0, zmin=-peak, zmax=peak,
                 colorbar=dict(thickness=10, len=1, tickmode="array", tickvals=ticks,
                               ticktext=[f"{v:.1e}" if v else "0" for v in ticks]),
                 hovertemplate="%{y}, %{x}: %{z:.3e}<extra></extra>")
    return make_figure([trace], _heatmap_layout(title, height or _rows_height(rows, 480), x_title, y_title, y))


def mask_figure(mask: Sequence[Sequence[bool]], title: str = "", visible: str = "visible",
                masked: str = "masked") -> go.Figure:
    """The causal mask of prefill as a grid: mask [rows][context_len], the last rows of the library's
    `paged.attention.causal_mask` (aligned to the end of the context: row q is token context_len - rows + q), True
    where that query sees a key. z is 1 where visible, 0 where masked; `visible` / `masked` are the hover's words."""
    q_len, context_len = len(mask), len(mask[0]) if mask else 0
    start = context_len - q_len
    z = [[1 if v else 0 for v in row] for row in mask]
    text = [[f"token {start + q} → key {k}: {visible if v else masked}" for k, v in enumerate(row)]
            for q, row in enumerate(z)]
    trace = dict(type="heatmap", z=z, x=list(range(context_len)), y=[f"q{start + q}" for q in range(q_len)],
                 colorscale=[[0, FREE_COLOR], [1, "#0072B2"]], zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
                 hovertext=text, hoverinfo="text")
    return make_figure([trace], _heatmap_layout(title, min(520, 90 + 18 * q_len), "key token_index", "query"))


@dataclass(frozen=True)
class StripWords:
    """The K/V strip's hover (English by default; a page passes its language's, from ui/strings). Format fields:
    token {token} {block} {offset} {slot} (where a token's K/V is read from); not_gathered {read} (that sentence, for
    a token the loop has not reached yet)."""

    token: str = "token {token} ← physical block {block}, offset {offset}, slot {slot}"
    not_gathered: str = "{read} (not gathered yet)"


def kv_strip_figure(addresses: Sequence, step: int, seq_id: int = 0, title: str = "",
                    words: StripWords = StripWords()) -> go.Figure:
    """The logical K/V strip: tokens 0 … context_len-1 in logical order. The first `step` are gathered (coloured,
    labelled with the physical block and offset they came from); token step-1, the latest read, is outlined.
    addresses: paged.addressing.Address objects in token order; `words`: the hover's sentences."""
    n = len(addresses)
    color = seq_color(seq_id)
    show_text = n <= 48
    xs, colors, texts, hover = [], [], [], []
    for a in addresses:
        got = a.token_index < step
        xs.append(a.token_index)
        colors.append(color if got else FREE_COLOR)
        texts.append(f"{a.physical_block_id}:{a.block_offset}" if (got and show_text) else "")
        read = words.token.format(token=a.token_index, block=a.physical_block_id, offset=a.block_offset, slot=a.slot)
        hover.append(read if got else words.not_gathered.format(read=read))
    cell_px = max(6, min(34, 860 // max(n, 1)))
    current = [step - 1] if 0 < step <= n else []
    data = [dict(type="scatter", x=xs, y=[0] * n, mode="markers+text", name="gathered", text=texts,
                 hovertext=hover, hoverinfo="text", textfont=dict(size=9, color=text_color(color)),
                 marker=dict(symbol="square", size=cell_px - 2, color=colors, line=dict(width=0.5, color="#999999"))),
            dict(type="scatter", x=current, y=[0] * len(current), mode="markers", name="highlight",
                 hoverinfo="skip", marker=dict(symbol="square-open", size=cell_px, color=HIGHLIGHT_COLOR,
                                               line=dict(width=3, color=HIGHLIGHT_COLOR)))]
    layout = title_layout(title, 110 if title else 80, bottom=24)
    layout.update(showlegend=False, width=max(640, int(n * cell_px + 80)),
                  xaxis=dict(range=[-0.7, n - 0.3], fixedrange=True, showgrid=False, tickfont=dict(size=9)),
                  yaxis=dict(visible=False, range=[-0.6, 0.6], fixedrange=True))
    return make_figure(data, layout)
