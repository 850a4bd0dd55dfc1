"""Logical → physical mapping of several sequences: each sequence's logical blocks on top (grouped, in order), the
pool's physical blocks below, one line per block-table entry, coloured per sequence."""

from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go

from .colors import FREE_COLOR, seq_color, seq_label, text_color
from .figure import make_figure, title_layout


def mapping_figure(tables: Mapping[int, Sequence[int]], cached_counts: Mapping[int, int], block_size: int,
                   num_blocks: int, title: str = "",
                   new_blocks: Mapping[int, Sequence[int]] | None = None) -> go.Figure:
    """tables: seq_id -> block_table; cached_counts: seq_id -> cached_token_count (tokens written). new_blocks:
    seq_id -> physical blocks taken from the free list by the latest step (their lines are drawn thick and dashed).
    Traces: one "links <label>" line trace and one "<label>" marker trace per sequence, then "physical"."""
    new_blocks = new_blocks or {}
    seq_ids = list(tables)
    total = sum(len(tables[s]) for s in seq_ids)
    slots = total + max(len(seq_ids) - 1, 0)  # one empty position between sequences
    span = max(num_blocks - 1, 1)
    step = span / max(slots - 1, 1) if slots > 1 else 0
    # marker sizes shrink with the number of boxes so neighbours never overlap in a ~800 px wide plot
    phys_px = max(8, min(22, 760 // max(num_blocks, 1) - 2))
    logical_px = max(8, min(24, int(phys_px * num_blocks / max(slots, 1))))
    data: list[dict] = []
    owner: dict[int, int] = {}
    pos = 0
    top_y, bottom_y = 1.0, 0.0
    for s in seq_ids:
        table, n = tables[s], cached_counts.get(s, 0)
        label, color = seq_label(s), seq_color(s)
        xs, lx, ly, hover, text = [], [], [], [], []
        for j, block in enumerate(table):
            x = pos * step if slots > 1 else span / 2
            xs.append(x)
            first, last = j * block_size, min((j + 1) * block_size, n) - 1
            tokens = f"tokens {first}–{last}" if last >= first else "no tokens yet"
            hover.append(f"{label} logical block {j} → physical block {block} ({tokens})")
            text.append(f"{label}{j}" if logical_px >= 18 else "")
            if 0 <= block < num_blocks:
                owner.setdefault(block, s)
                lx += [x, block, None]
                ly += [top_y - 0.08, bottom_y + 0.08, None]
            pos += 1
        pos += 1
        dashed = [b for b in new_blocks.get(s, ()) if b in table]
        data.append(dict(type="scatter", x=lx, y=ly, mode="lines", name=f"links {label}", hoverinfo="skip",
                         line=dict(color=color, width=2), showlegend=False))
        if dashed:
            nx, ny = [], []
            for b in dashed:
                j = list(table).index(b)
                nx += [xs[j], b, None]
                ny += [top_y - 0.08, bottom_y + 0.08, None]
            data.append(dict(type="scatter", x=nx, y=ny, mode="lines", name=f"new {label}", hoverinfo="skip",
                             line=dict(color=color, width=5, dash="dot"), showlegend=False))
        data.append(dict(type="scatter", x=xs, y=[top_y] * len(xs), mode="markers+text", name=label, text=text,
                         hovertext=hover, hoverinfo="text", textfont=dict(size=10, color=text_color(color)),
                         marker=dict(symbol="square", size=logical_px, color=color,
                                     line=dict(width=1, color="#333333"))))
    colors = [seq_color(owner[b]) if b in owner else FREE_COLOR for b in range(num_blocks)]
    data.append(dict(
        type="scatter", x=list(range(num_blocks)), y=[bottom_y] * num_blocks, mode="markers+text", name="physical",
        text=[str(b) if phys_px >= 16 else "" for b in range(num_blocks)],
        textfont=dict(size=10, color=[text_color(c) for c in colors]),
        hovertext=[f"physical block {b}: " + (seq_label(owner[b]) if b in owner else "free")
                   for b in range(num_blocks)], hoverinfo="text",
        marker=dict(symbol="square", size=phys_px, color=colors, line=dict(width=1, color="#333333")),
        showlegend=False))
    layout = title_layout(title, 230, bottom=8)
    layout.update(showlegend=False, xaxis=dict(visible=False, range=[-1, num_blocks], fixedrange=True),
                  yaxis=dict(range=[-0.35, 1.3], fixedrange=True, tickvals=[bottom_y, top_y],
                             ticktext=["physical", "logical"], showgrid=False, zeroline=False))
    return make_figure(data, layout)
