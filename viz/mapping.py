"""Logical → physical mapping of several sequences: each sequence's logical blocks on top (grouped, in order), the
pool's physical blocks below, one line per block-table entry, coloured per sequence."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .colors import FREE_COLOR, seq_color, seq_label, text_color


@dataclass(frozen=True)
class MappingLabels:
    """The words of mapping_html (English by default; a page passes its language's, from ui/strings). Format fields:
    entry {seq} {logical} {block} {tokens}; tokens {first} {last}; block {block} {owner} (a sequence label or
    `free`)."""

    logical: str = "logical"    # the top row's label
    physical: str = "physical"  # the bottom row's label
    entry: str = "{seq} logical block {logical} → physical block {block} ({tokens})"
    tokens: str = "tokens {first}–{last}"
    no_tokens: str = "no tokens yet"
    block: str = "physical block {block}: {owner}"
    free: str = "free"
    alt: str = "block tables"   # the image's alternative text


def mapping_html(tables: Mapping[int, Sequence[int]], cached_counts: Mapping[int, int], block_size: int,
                 num_blocks: int, new_blocks: Mapping[int, Sequence[int]] | None = None, width: int = 560,
                 height: int = 150, labels: MappingLabels = MappingLabels()) -> str:
    """tables: seq_id -> block_table; cached_counts: seq_id -> cached_token_count (tokens written); new_blocks:
    seq_id -> blocks the latest step took from the free list. As HTML (a step redraws it in a few ms, a plotly chart
    in ~100): an SVG image (st.html strips inline <svg>) with two rows (logical blocks on top, grouped per sequence;
    the pool's physical blocks below),
    one line per block-table entry (class "link", data-seq and data-block; a block the latest step took from the
    free list: class "link new", thick and dotted), each box a rect with data-block / data-seq; over each box a span
    whose tooltip (title) names the entry and its tokens, in `labels`' words; the title goes above it
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
             f'<text x="{left - 10}" y="{top_y + 4}" text-anchor="end" fill="#444444" font-size="12">'
             f'{esc(labels.logical)}</text>'
             f'<text x="{left - 10}" y="{bottom_y + 4}" text-anchor="end" fill="#444444" font-size="12">'
             f'{esc(labels.physical)}</text>']
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
            tokens = labels.tokens.format(first=first, last=last) if last >= first else labels.no_tokens
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
            tip_span(x, top_y, logical_px, labels.entry.format(seq=label, logical=j, block=block, tokens=tokens))
            pos += 1
        pos += 1
    for b in range(num_blocks):
        color, h = seq_color(owner[b]) if b in owner else FREE_COLOR, phys_px / 2
        boxes.append(f'<rect data-block="{b}" x="{sx(b) - h:.1f}" y="{bottom_y - h:.1f}" width="{phys_px}" '
                     f'height="{phys_px}" fill="{color}" stroke="#333333"/>')
        if phys_px >= 16:
            boxes.append(f'<text x="{sx(b):.1f}" y="{bottom_y + 3.5:.1f}" text-anchor="middle" '
                         f'fill="{text_color(color)}">{b}</text>')
        tip_span(sx(b), bottom_y, phys_px,
                 labels.block.format(block=b, owner=seq_label(owner[b]) if b in owner else labels.free))
    parts += boxes + ["</svg>"]
    image = base64.b64encode("".join(parts).encode("utf-8")).decode("ascii")
    return (f'<div class="paged-pool"><div class="pc-plot" style="max-width:{width}px"><img alt="{esc(labels.alt)}" '
            f'src="data:image/svg+xml;base64,{image}">{"".join(tips)}</div></div>')


def read_mapping(markup: str) -> tuple[str, list[str]]:
    """The SVG text of mapping_html markup and its tooltips (titles, entities decoded), in order."""
    image = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', markup).group(1)
    return (base64.b64decode(image).decode("utf-8"),
            [html.unescape(t) for t in re.findall(r'class="pm-tip"[^>]* title="([^"]*)"', markup)])
