"""Logical → physical mapping of several sequences: each sequence's logical blocks on top (grouped, in order), the
pool's physical blocks below, one line per block-table entry, coloured per sequence."""

from __future__ import annotations

import base64
import html
import re
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


def mapping_html(tables: Mapping[int, Sequence[int]], cached_counts: Mapping[int, int], block_size: int,
                 num_blocks: int, new_blocks: Mapping[int, Sequence[int]] | None = None, width: int = 560,
                 height: int = 150) -> str:
    """mapping_figure as HTML (a step redraws it in a few ms, a plotly chart in ~100): an SVG image (st.html strips
    inline <svg>) with the same rows (logical blocks on top, grouped per sequence; the pool's physical blocks below),
    one line per block-table entry (class "link", data-seq and data-block; a block the latest step took from the
    free list: class "link new", thick and dotted), each box a rect with data-block / data-seq; over each box a span
    whose tooltip (title) is the figure's hover text. Arguments as mapping_figure's; the title goes above it
    (ui.widgets.show_cells). ValueError when num_blocks < 1 or block_size < 1."""
    if num_blocks < 1 or block_size < 1:
        raise ValueError(f"num_blocks={num_blocks} and block_size={block_size} must both be >= 1")
    new_blocks, esc = new_blocks or {}, html.escape
    seq_ids = list(tables)
    slots = sum(len(tables[s]) for s in seq_ids) + max(len(seq_ids) - 1, 0)  # one gap between sequences
    span = max(num_blocks - 1, 1)
    step = span / max(slots - 1, 1) if slots > 1 else 0
    left, right = 64, 12
    pw = width - left - right
    sx = lambda x: left + pw * (x + 1) / (num_blocks + 1)  # noqa: E731  (the figure's x range: -1 … num_blocks)
    unit = pw / (num_blocks + 1)
    phys_px = max(8, min(22, int(unit) - 2))
    logical_px = max(8, min(24, int(phys_px * num_blocks / max(slots, 1))))
    top_y, bottom_y = 30, height - 30
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-size="11" '
             f'font-family="sans-serif" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left - 10}" y="{top_y + 4}" text-anchor="end" fill="#444444" font-size="12">logical</text>'
             f'<text x="{left - 10}" y="{bottom_y + 4}" text-anchor="end" fill="#444444" font-size="12">physical'
             f'</text>']
    boxes, tips, owner, pos = [], [], {}, 0

    def tip_span(x: float, y: float, size: int, text: str) -> None:
        tips.append(f'<span class="pm-tip" style="position:absolute;left:{100 * (x - size / 2) / width:.2f}%;'
                    f'top:{100 * (y - size / 2) / height:.2f}%;width:{100 * size / width:.2f}%;'
                    f'height:{100 * size / height:.2f}%" title="{esc(text)}"></span>')

    for s in seq_ids:
        table, n = tables[s], cached_counts.get(s, 0)
        label, color = seq_label(s), seq_color(s)
        fresh = {b for b in new_blocks.get(s, ()) if b in table}
        for j, block in enumerate(table):
            x = sx(pos * step if slots > 1 else span / 2)
            first, last = j * block_size, min((j + 1) * block_size, n) - 1
            tokens = f"tokens {first}–{last}" if last >= first else "no tokens yet"
            if 0 <= block < num_blocks:
                owner.setdefault(block, s)
                new = block in fresh and list(table).index(block) == j
                style = 'stroke-width="5" stroke-dasharray="2 4"' if new else 'stroke-width="2"'
                parts.append(f'<line class="link{" new" if new else ""}" data-seq="{esc(label)}" data-block="{block}" '
                             f'x1="{x:.1f}" y1="{top_y + logical_px / 2:.1f}" x2="{sx(block):.1f}" '
                             f'y2="{bottom_y - phys_px / 2:.1f}" stroke="{color}" {style}/>')
            h = logical_px / 2
            boxes.append(f'<rect data-seq="{esc(label)}" data-logical="{j}" x="{x - h:.1f}" y="{top_y - h:.1f}" '
                         f'width="{logical_px}" height="{logical_px}" fill="{color}" stroke="#333333"/>')
            if logical_px >= 18:
                boxes.append(f'<text x="{x:.1f}" y="{top_y + 3.5:.1f}" text-anchor="middle" '
                             f'fill="{text_color(color)}">{esc(label)}{j}</text>')
            tip_span(x, top_y, logical_px, f"{label} logical block {j} → physical block {block} ({tokens})")
            pos += 1
        pos += 1
    for b in range(num_blocks):
        color, h = seq_color(owner[b]) if b in owner else FREE_COLOR, phys_px / 2
        boxes.append(f'<rect data-block="{b}" x="{sx(b) - h:.1f}" y="{bottom_y - h:.1f}" width="{phys_px}" '
                     f'height="{phys_px}" fill="{color}" stroke="#333333"/>')
        if phys_px >= 16:
            boxes.append(f'<text x="{sx(b):.1f}" y="{bottom_y + 3.5:.1f}" text-anchor="middle" '
                         f'fill="{text_color(color)}">{b}</text>')
        tip_span(sx(b), bottom_y, phys_px, f"physical block {b}: " + (seq_label(owner[b]) if b in owner else "free"))
    parts += boxes + ["</svg>"]
    image = base64.b64encode("".join(parts).encode("utf-8")).decode("ascii")
    return (f'<div class="paged-pool"><div class="pc-plot" style="max-width:{width}px"><img alt="block tables" '
            f'src="data:image/svg+xml;base64,{image}">{"".join(tips)}</div></div>')


def read_mapping(markup: str) -> tuple[str, list[str]]:
    """The SVG text of mapping_html markup and its tooltips (titles, entities decoded), in order."""
    image = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', markup).group(1)
    return (base64.b64decode(image).decode("utf-8"),
            [html.unescape(t) for t in re.findall(r'class="pm-tip"[^>]* title="([^"]*)"', markup)])
