"""Sharing figures: the pool block by block with reference counts, prefix-cache hits per logical block (HTML), and
the memory that sharing saves. Colours and labels per sequence as everywhere (colors.seq_color / seq_label)."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import plotly.graph_objects as go

from .cells import _cell, _row
from .colors import FREE_COLOR, OKABE_ITO, seq_color, seq_label, text_color, tint
from .describe import pool_record
from .engine import integer_dtick
from .figure import make_figure, title_layout

CACHED_FREE_COLOR = "#D9D9D9"  # free, but still holding a hashed full block a new prompt can reuse
HIT_COLOR = OKABE_ITO["blue"]
MISS_COLOR = OKABE_ITO["orange"]
COPY_COLOR = OKABE_ITO["vermillion"]


def block_tokens(token_text: Mapping[int, Sequence[str]] | None, seq_id: int, logical_block_id: int,
                 block_size: int, cached_counts: Mapping[int, int], label: str = " · tokens {tokens}") -> str:
    """" · tokens 'a' '␣b'": the text of the tokens `seq_id` has written in its logical block (those below its
    cached_token_count; HTML-escaped) in `label` (format field {tokens}), or "" when `token_text` has none."""
    texts = (token_text or {}).get(seq_id) or []
    start = logical_block_id * block_size
    end = min(start + block_size, cached_counts.get(seq_id, 0))
    shown = [f"'{html.escape(str(x), quote=False)}'" for x in texts[start:end]]
    return label.format(tokens=" ".join(shown)) if shown else ""


@dataclass(frozen=True)
class RefcountWords:
    """The sentences of refcount_pool_figure's hover (English by default; a page passes its language's, from
    ui/strings). Format fields: held {block} {ref} {holders} {filled} {block_size}; holder {seq} {logical};
    cached_free and free {block}; tokens {tokens} (the block's token texts) and hashed are appended to a held block's
    line."""

    held: str = "physical block {block}: ref count {ref} · held by {holders} · {filled}/{block_size} slots written"
    holder: str = "{seq} (logical block {logical})"
    tokens: str = " · tokens {tokens}"
    hashed: str = " · hashed: a prompt with this prefix reuses it"
    cached_free: str = ("physical block {block}: free (ref count 0), but it keeps its prefix-cache hash: a prompt "
                        "with this prefix takes it back without recomputing")
    free: str = "physical block {block}: free (ref count 0)"


ARC_POINTS = 17  # points along each copy-on-write arc


def copy_arc(src: tuple[float, float], dst: tuple[float, float]) -> tuple[list[float], list[float]]:
    """A copy-on-write arrow's path as (xs, ys), ARC_POINTS points in grid units (y grows downward):
    a curve from the top edge of cell `src` up and over to the top edge of cell `dst`, higher the
    farther apart they are. Several copies of one block then nest as separate arcs above the row,
    instead of straight arrows through the cells (and ref counts) between, where "3 → 4, 3 → 5,
    3 → 6" read as a chain 3 → 4 → 5 → 6. Raises: nothing (pure geometry)."""
    (x0, y0), (x1, y1) = src, dst
    y0, y1 = y0 - 0.42, y1 - 0.42  # the cells' top edges
    rise = min(1.6, 0.3 + 0.45 * math.hypot(x1 - x0, y1 - y0))
    cx, cy = (x0 + x1) / 2, min(y0, y1) - rise  # a quadratic Bezier's control point above the pair
    ts = [i / (ARC_POINTS - 1) for i in range(ARC_POINTS)]
    return ([(1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t * t * x1 for t in ts],
            [(1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t * t * y1 for t in ts])


def refcount_pool_figure(num_blocks: int, block_size: int, tables: Mapping[int, Sequence[int]],
                         cached_counts: Mapping[int, int], ref_counts: Sequence[int], cached: Iterable[int] = (),
                         copies: Sequence[tuple[int, int]] = (), title: str = "", cols: int | None = None,
                         max_width: int = 680, token_text: Mapping[int, Sequence[str]] | None = None,
                         words: RefcountWords = RefcountWords()) -> go.Figure:
    """One square per physical block, coloured by its first holder, its ref count printed large (0 on free blocks
    is left blank) and its id small in the corner. Shared blocks (ref count > 1) get a thick black outline and one
    dot per holder in the holder's colour. `cached`: free blocks that keep a prefix-cache hash (grey, "♻").
    `copies`: copy-on-write (src, dst) of the latest step, outlined in vermillion with an arrow src → dst.
    tables: seq_id -> block_table (every holder); cached_counts: seq_id -> cached_token_count (for the fill).
    token_text: seq_id -> the text of each of its tokens by token index (lessons.tokens.token_label); a held
    block's hover adds the tokens written in it, e.g. "tokens '⟨BOS⟩' 'The' '␣fox'" (its first holder's).
    words: the hover's sentences (RefcountWords). Square cells of at most 46 px, the figure at most `max_width` px
    wide. Traces: "blocks", "shared", "holders", "copy-on-write", "copy arcs" (copy_arc; an
    annotation puts the arrowhead at each arc's end), "block ids" (last: drawn on top)."""
    cols = cols or min(num_blocks, 16)
    cell_px = max(24, min(46, (max_width - 20) // cols))
    rows = math.ceil(num_blocks / cols)
    xy = lambda b: (b % cols, b // cols)  # noqa: E731
    holders: list[list[tuple[int, int]]] = [[] for _ in range(num_blocks)]
    fill = [0] * num_blocks
    for seq_id, table in tables.items():
        n = cached_counts.get(seq_id, 0)
        for logical, block in enumerate(table):
            if 0 <= block < num_blocks:
                holders[block].append((seq_id, logical))
                fill[block] = max(fill[block], min(block_size, max(0, n - logical * block_size)))
    cached = set(cached)
    colors, text, fonts, hover = [], [], [], []
    for b in range(num_blocks):
        ref = ref_counts[b]
        if ref > 0 and holders[b]:
            color = seq_color(holders[b][0][0])
            if fill[b] < block_size:
                color = tint(color, 0.6)  # a last block still filling up
            held = ", ".join(words.holder.format(seq=seq_label(s), logical=j) for s, j in holders[b])
            hover.append(words.held.format(block=b, ref=ref, holders=held, filled=fill[b], block_size=block_size)
                         + block_tokens(token_text, *holders[b][0], block_size, cached_counts, words.tokens)
                         + (words.hashed if b in cached else ""))
            text.append(f"<b>{ref}</b>")
        elif b in cached:
            color = CACHED_FREE_COLOR
            hover.append(words.cached_free.format(block=b))
            text.append("♻")
        else:
            color = FREE_COLOR
            hover.append(words.free.format(block=b))
            text.append("")
        colors.append(color)
        fonts.append(text_color(color))
    pts = [xy(b) for b in range(num_blocks)]
    size = cell_px - 4
    data = [dict(type="scatter", name="blocks", x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers+text",
                 text=text, textfont=dict(size=max(10, cell_px // 3), color=fonts), hovertext=hover, hoverinfo="text",
                 marker=dict(symbol="square", size=size, color=colors, line=dict(width=0.5, color="#999999")),
                 showlegend=False)]
    ids = dict(type="scatter", name="block ids", x=[p[0] - 0.3 for p in pts], y=[p[1] - 0.3 for p in pts],
               mode="text", text=[str(b) for b in range(num_blocks)],
               textfont=dict(size=8, color=[("#333333" if f == "#000000" else "#F0F0F0") for f in fonts]),
               hoverinfo="skip", showlegend=False)
    shared = [b for b in range(num_blocks) if ref_counts[b] > 1]
    # the shared outline runs around the cell, in the gap between cells (not over the block id in its corner)
    data.append(dict(type="scatter", name="shared", x=[xy(b)[0] for b in shared], y=[xy(b)[1] for b in shared],
                     mode="markers", customdata=shared, hoverinfo="skip", showlegend=False,
                     marker=dict(symbol="square-open", size=cell_px, color="#000000", line=dict(width=3))))
    dx, dy, dc = [], [], []
    for b in shared:
        x, y = xy(b)
        owners = holders[b][:6]
        for i, (s, _) in enumerate(owners):
            dx.append(x + (i - (len(owners) - 1) / 2) * 0.17)
            dy.append(y + 0.3)
            dc.append(seq_color(s))
    data.append(dict(type="scatter", name="holders", x=dx, y=dy, mode="markers", hoverinfo="skip", showlegend=False,
                     marker=dict(symbol="circle", size=max(4, cell_px // 6), color=dc,
                                 line=dict(width=1, color="#000000"))))
    copy_blocks = [b for pair in copies for b in pair if 0 <= b < num_blocks]
    data.append(dict(type="scatter", name="copy-on-write", x=[xy(b)[0] for b in copy_blocks],
                     y=[xy(b)[1] for b in copy_blocks], mode="markers", customdata=copy_blocks, hoverinfo="skip",
                     showlegend=False, marker=dict(symbol="square-open", size=size + 4, color=COPY_COLOR,
                                                   line=dict(width=3))))
    data.append(ids)  # drawn last: on top of every outline
    arcs = [copy_arc(xy(src), xy(dst)) for src, dst in copies
            if 0 <= src < num_blocks and 0 <= dst < num_blocks]
    data.insert(len(data) - 1, dict(type="scatter", name="copy arcs", mode="lines", hoverinfo="skip",
                                    showlegend=False, line=dict(color=COPY_COLOR, width=2.5),
                                    x=[x for arc in arcs for x in [*arc[0], None]],
                                    y=[y for arc in arcs for y in [*arc[1], None]]))
    # the arrowhead at each arc's end, along its last stretch
    annotations = [dict(x=xs[-1], y=ys[-1], ax=xs[-3], ay=ys[-3], xref="x", yref="y", axref="x",
                        ayref="y", text="", showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=2.5,
                        arrowcolor=COPY_COLOR, standoff=0) for xs, ys in arcs]
    lift = max([-min(ys) - 0.4 for _, ys in arcs] + [0.0])  # room above row 0 for its arcs (+0.1)
    top, bottom = (40 if title else 8), 8
    width = max(cols * cell_px + 20, 360)
    height = round((rows + lift) * cell_px) + top + bottom
    layout = title_layout(title, height, top=top, bottom=bottom)
    layout.update(width=width, showlegend=False, annotations=annotations,
                  xaxis=dict(visible=False, range=[-0.5, -0.5 + (width - 20) / cell_px], fixedrange=True),
                  yaxis=dict(visible=False, range=[rows - 0.5, -0.5 - lift], fixedrange=True),
                  meta=dict(alt=pool_record(num_blocks, tables, {s: seq_label(s) for s in tables},
                                            list(ref_counts))))  # its text alternative (viz.describe)
    return make_figure(data, layout)


def memory_figure(steps: Sequence[int], held: Sequence[int], without: Sequence[int], num_blocks: int,
                  title: str = "", held_name: str = "blocks held (with sharing)",
                  without_name: str = "blocks in block tables (no sharing)", x_title: str = "step",
                  y_title: str = "blocks") -> go.Figure:
    """Blocks held with sharing vs the sum of every table's length (what copying instead of sharing would hold),
    per step, the gap shaded; a dashed line at num_blocks, named under its right end (the pool's size: the legend
    leaves it out). Traces: without_name, held_name, "num_blocks"."""
    xs = list(steps)
    data = [dict(type="scatter", name=without_name, x=xs, y=list(without), mode="lines",
                 line=dict(color=OKABE_ITO["vermillion"], width=2, dash="dot")),
            dict(type="scatter", name=held_name, x=xs, y=list(held), mode="lines", fill="tonexty",
                 fillcolor="rgba(0,158,115,0.18)", line=dict(color=OKABE_ITO["bluish_green"], width=2.5)),
            dict(type="scatter", name="num_blocks", x=[xs[0] if xs else 0, xs[-1] if xs else 1],
                 y=[num_blocks, num_blocks], mode="lines", line=dict(color="#777777", width=1, dash="dash"),
                 hoverinfo="skip", showlegend=False)]
    layout = title_layout(title, 320, bottom=75)
    layout.update(annotations=[dict(x=1, xref="paper", y=num_blocks, text=f"num_blocks = {num_blocks}", xanchor="right",
                                    yanchor="top", showarrow=False, font=dict(size=11, color="#555555"))],
                  legend=dict(orientation="h", y=-0.3, yanchor="top", x=0),
                  hovermode="x unified",
                  xaxis=dict(title=dict(text=x_title), gridcolor="#E5E5E5", dtick=integer_dtick(max(xs + [5]))),
                  yaxis=dict(title=dict(text=y_title), gridcolor="#E5E5E5", rangemode="tozero"))
    return make_figure(data, layout)


@dataclass(frozen=True)
class HitsLabels:
    """The words of hits_html's row names and tooltips (English by default; a page passes its language's, from
    ui/strings). Format fields: row {seq} {step}; entry {seq} {logical} {block} {verdict} (`hit` or `miss`)."""

    row: str = "{seq} · step {step}"
    entry: str = "{seq} logical block {logical} → physical block {block}: {verdict}"
    hit: str = "prefix-cache hit, K/V reused"
    miss: str = "computed at prefill"


def hits_html(allocations: Sequence[tuple[int, int, Sequence[int], Sequence[bool]]], hit_name: str = "hit",
              miss_name: str = "computed", max_cols: int = 20, labels: HitsLabels = HitsLabels()) -> str:
    """Prefix-cache hits of prompts at allocation as HTML cells (viz.cells style: a step redraws it in a few ms),
    newest first as given: one row per (step, seq_id, block_table, hits) named "<label> · step <n>", one cell per
    logical block (its first `max_cols`; the physical block printed) in HIT_COLOR (K/V reused) or MISS_COLOR
    (computed at prefill), the mapping and verdict as each cell's tooltip (in `labels`' words), a legend of the two
    colours.
    ValueError when a table and its hits differ in length."""
    rows = []
    for step, seq_id, table, hits in allocations:
        if len(table) != len(hits):
            raise ValueError(f"sequence {seq_id}: {len(table)} blocks but {len(hits)} hit flags")
        label = seq_label(seq_id)
        cells = [_cell(str(block), HIT_COLOR if hit else MISS_COLOR,
                       labels.entry.format(seq=label, logical=j, block=block,
                                           verdict=labels.hit if hit else labels.miss))
                 for j, (block, hit) in enumerate(list(zip(table, hits))[:max_cols])]
        rows.append(_row(labels.row.format(seq=label, step=step), cells))
    legend = "".join(f'<span class="pp-key"><span style="background:{c}"></span>{html.escape(n)}</span>'
                     for c, n in ((HIT_COLOR, hit_name), (MISS_COLOR, miss_name)))
    return (f'<div class="paged-cells">{"".join(rows)}</div>'
            f'<div class="paged-pool"><div class="pp-legend">{legend}</div></div>')
