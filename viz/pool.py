"""The physical pool as a grid: one row of `block_size` cells per physical block, cells coloured by the sequence
that owns them, the sequence label and token index printed in the cell, hover showing the whole address chain."""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import plotly.graph_objects as go

from .describe import alt_attr, pool_record
from .colors import FREE_COLOR, HIGHLIGHT_COLOR, RESERVED_ALPHA, seq_color, seq_label, text_color, tint
from .figure import make_figure, title_layout


@dataclass
class Cell:
    """One slot of the pool and who maps to it: (seq_id, token_index) pairs, or only an owner if not written."""

    slot: int
    physical_block_id: int
    block_offset: int
    tokens: list[tuple[int, int]] = field(default_factory=list)  # (seq_id, token_index)
    owners: list[int] = field(default_factory=list)              # seq ids whose table holds this block


@dataclass(frozen=True)
class PoolWords:
    """The pool hover's sentences (English by default; a page passes its language's, from ui/strings). Format fields:
    reserved {owners}; chain (one token's address chain) {seq} {token} {logical} {block} {offset} {slot}; place
    (a slot's own address) {block} {offset} {slot}."""

    free: str = "free"
    reserved: str = "reserved by {owners}, not written yet"
    clash: str = "clash: these tokens share one slot, the later write overwrites the earlier"
    chain: str = "{seq} token {token} → logical block {logical} → physical block {block} → offset {offset} → slot {slot}"
    place: str = "physical block {block}, offset {offset}, slot {slot}"
    stray: str = "holds {seq} token {token}, written here by mistake (it belongs in slot {meant})"
    stray_gone: str = "holds {seq} token {token}, written here by mistake ({seq} has finished)"
    lost: str = "{seq} token {token} belongs here: its K/V are lost (overwritten)"
    missing: str = "{seq} token {token} belongs here: its K/V are missing (never written to this slot)"
    wrong_key: str = "written wrongly"
    missing_key: str = "missing"


def chain_text(seq_id: int, token_index: int, block_size: int, physical_block_id: int,
               words: PoolWords = PoolWords(), name: str | None = None) -> str:
    """The address chain of one token as one line, e.g. 'A token 5 → logical block 1 → physical block 2 →
    offset 1 → slot 9' (words.chain; `name`: the sequence's name, seq_label(seq_id) by default)."""
    logical_block_id, block_offset = divmod(token_index, block_size)
    slot = physical_block_id * block_size + block_offset
    return words.chain.format(seq=seq_label(seq_id) if name is None else name, token=token_index,
                              logical=logical_block_id, block=physical_block_id, offset=block_offset, slot=slot)


def token_hover(token_text: Mapping[int, Sequence[str]] | None, seq_id: int, token_index: int) -> str:
    """" · token '␣the'" for token `token_index` of `seq_id` (HTML-escaped, so "<s>" stays text in a hover), or ""
    when `token_text` has no text for it."""
    texts = (token_text or {}).get(seq_id)
    if texts is None or not 0 <= token_index < len(texts):
        return ""
    return f" · token '{html.escape(str(texts[token_index]), quote=False)}'"


def pool_cells(num_blocks: int, block_size: int, tables: Mapping[int, Sequence[int]],
               cached_counts: Mapping[int, int]) -> list[Cell]:
    """Every slot of the pool with the tokens that map to it. Table entries outside [0, num_blocks) are skipped
    (the caller reports them); two tokens on one slot (a block listed twice) are both kept."""
    cells = [Cell(b * block_size + o, b, o) for b in range(num_blocks) for o in range(block_size)]
    for seq_id, table in tables.items():
        for logical_block_id, block in enumerate(table):
            if not 0 <= block < num_blocks:
                continue
            for offset in range(block_size):
                cell = cells[block * block_size + offset]
                if seq_id not in cell.owners:
                    cell.owners.append(seq_id)
                token_index = logical_block_id * block_size + offset
                if token_index < cached_counts.get(seq_id, 0):
                    cell.tokens.append((seq_id, token_index))
    return cells


def grid_columns(num_blocks: int, block_size: int, aspect: float = 3.5) -> int:
    """How many columns of blocks make the grid about `aspect` times wider than tall."""
    best, best_cost = 1, math.inf
    for cols in range(1, num_blocks + 1):
        rows = math.ceil(num_blocks / cols)
        cost = abs(math.log((cols * (block_size + 1.6)) / rows / aspect))
        if cost < best_cost:
            best, best_cost = cols, cost
    return best


def _damaged(cell: Cell, held: tuple[int, int] | None, tables: Mapping[int, Sequence[int]], block_size: int,
             name, words: PoolWords) -> dict | None:
    """A cell whose contents differ from what the tables say it holds: {"damage": "wrong" | "missing", "text",
    "color", "lines"}; None when the pool holds just what the tables expect there."""
    if held is None if not cell.tokens else held in cell.tokens:
        return None
    lines = []
    if held is not None:
        seq, token = held
        table = tables.get(seq)
        if table is not None and token // block_size < len(table):
            meant = table[token // block_size] * block_size + token % block_size
            lines.append(words.stray.format(seq=name(seq), token=token, meant=meant))
        else:
            lines.append(words.stray_gone.format(seq=name(seq), token=token))
    for seq, token in cell.tokens:
        lines.append((words.lost if held is not None else words.missing).format(seq=name(seq), token=token))
    if held is None:  # an empty slot that should hold a token: drawn as reserved, marked missing
        return {"damage": "missing", "text": "", "color": tint(seq_color(cell.owners[0]), RESERVED_ALPHA),
                "lines": lines}
    return {"damage": "wrong", "text": f"{name(held[0])}{held[1]}", "color": seq_color(held[0]), "lines": lines}


def grid_cells(num_blocks: int, block_size: int, tables: Mapping[int, Sequence[int]],
               cached_counts: Mapping[int, int], labels: Mapping[int, str] | None = None,
               token_text: Mapping[int, Sequence[str]] | None = None, words: PoolWords = PoolWords(),
               holds: Mapping[int, tuple[int, int]] | None = None, hide_tokens: bool = False) -> list[dict]:
    """What the pool grid shows in each slot, in slot order: {"slot", "owner" (first seq id holding the block, or
    None), "text" (e.g. "A5", a clash "4/8", "" when not written), "hover" (plotly hover text: lines joined by <br>,
    token text HTML-escaped; its sentences in `words`), "color", "font", "damage" (None, "wrong" or "missing")}.
    Shared by pool_figure and pool_html; arguments as pool_figure's.

    holds: slot -> (seq_id, token_index) of the K/V the pool really holds there (e.g. lessons.playground's
    `holds`). Given, each cell shows what it holds: a slot holding a token its tables do not put there is "wrong"
    (labelled and coloured by the token it holds; the hover names it, where it belongs, and the token it
    destroyed), a slot the tables say holds a token but that holds nothing is "missing". None: the tables' layout
    is taken as the pool's contents (no writes to draw, e.g. page 1). hide_tokens: no cell says which token it
    holds (text "", hover only the slot's own address): a quiz question about a token's slot is open."""
    labels = dict(labels or {})
    name = lambda s: labels.get(s, seq_label(s))  # noqa: E731
    out = []
    for cell in pool_cells(num_blocks, block_size, tables, cached_counts):
        owner = cell.owners[0] if cell.owners else None
        where = words.place.format(block=cell.physical_block_id, offset=cell.block_offset, slot=cell.slot)
        text, color = "", FREE_COLOR if owner is None else seq_color(owner)
        bad = None if holds is None else _damaged(cell, holds.get(cell.slot), tables, block_size, name, words)
        if bad is not None:
            text, color = bad["text"], bad["color"]
            first = f"{where}: " + (f"{words.free}; " if owner is None else "") + bad["lines"][0]
            hover = "<br>".join([first] + bad["lines"][1:])
        elif owner is None:
            hover = f"{where}: {words.free}"
        elif not cell.tokens:
            color = tint(color, RESERVED_ALPHA)
            hover = f"{where}: " + words.reserved.format(owners=", ".join(name(s) for s in cell.owners))
        else:
            clash = len(cell.tokens) > 1
            first_seq, first_tok = cell.tokens[0]
            # a clash (one block listed twice) prints both tokens, e.g. "4/8"
            text = "/".join(str(tok) for _, tok in cell.tokens[:2]) if clash else f"{name(first_seq)}{first_tok}"
            lines = [chain_text(s, tok, block_size, cell.physical_block_id, words, name(s))
                     + token_hover(token_text, s, tok) for s, tok in cell.tokens]
            if clash:
                lines.append(words.clash)
            hover = "<br>".join(lines)
        if hide_tokens:
            text, hover = "", where
        out.append({"slot": cell.slot, "owner": owner, "text": text, "hover": hover, "color": color,
                    "font": "#000000" if owner is None and bad is None else text_color(color),
                    "damage": bad and bad["damage"]})
    return out


def pool_figure(num_blocks: int, block_size: int, tables: Mapping[int, Sequence[int]],
                cached_counts: Mapping[int, int], highlight: Iterable[int] = (), read: Iterable[int] = (),
                title: str = "", labels: Mapping[int, str] | None = None, max_width: int = 820,
                min_width: int = 620, token_text: Mapping[int, Sequence[str]] | None = None,
                words: PoolWords = PoolWords(), hide_tokens: bool = False) -> go.Figure:
    """The pool grid.

    tables: seq_id -> block_table; cached_counts: seq_id -> cached_token_count, the tokens written (cells past it in
    the last block are drawn as reserved, in a light tint). highlight: slots outlined in black (the token being
    read / just written). read: slots already read (a thin grey outline). labels: seq_id -> text shown in cells
    (default A, B, C…). token_text: seq_id -> the text of each of its tokens by token index (e.g.
    lessons.tokens.token_label's "␣the", "⟨BOS⟩"); a written cell's hover adds "· token '␣the'" to its chain.
    words: the hover's sentences (PoolWords). hide_tokens: cells name no token (grid_cells). Cells are square, at most 36 px; the figure is between min_width and max_width pixels wide.
    Traces: "free", one per sequence (named by its label), "read", "highlight", "block ids".
    """
    labels = dict(labels or {})
    name = lambda s: labels.get(s, seq_label(s))  # noqa: E731
    cols = grid_columns(num_blocks, block_size)
    rows = math.ceil(num_blocks / cols)
    stride = block_size + 1.6  # a gap between block columns holds the block id

    def xy(slot: int) -> tuple[float, int]:
        block, offset = divmod(slot, block_size)
        return (block // rows) * stride + offset, block % rows

    groups: dict[int | None, dict[str, list]] = {}
    for cell in grid_cells(num_blocks, block_size, tables, cached_counts, labels, token_text, words,
                           hide_tokens=hide_tokens):
        g = groups.setdefault(cell["owner"], {"x": [], "y": [], "text": [], "hover": [], "color": [], "font": []})
        x, y = xy(cell["slot"])
        g["x"].append(x)
        g["y"].append(y)
        for k in ("text", "hover", "color", "font"):
            g[k].append(cell[k])

    # Square cells of cell_px pixels: x and y both map one unit to cell_px, the x range is widened (never the cells
    # stretched) when the figure is made wider than the grid to fit its title.
    x_min, x_max = -1.6, (cols - 1) * stride + block_size - 0.5
    cell_px = max(12, min(36, int((max_width - 20) / (x_max - x_min))))
    fig_width = max(min_width, int((x_max - x_min) * cell_px) + 20)
    x_max = x_min + (fig_width - 20) / cell_px
    marker_px = cell_px - 3
    font_px = max(7, min(11, int(cell_px * 0.38)))
    if cell_px < 22:  # too small to print "A123" legibly: the hover still tells everything
        for g in groups.values():
            g["text"] = [""] * len(g["text"])
    data = []
    for owner in [None] + sorted(k for k in groups if k is not None):
        if owner not in groups:
            continue
        g = groups[owner]
        data.append(dict(
            type="scatter", x=g["x"], y=g["y"], mode="markers+text", name="free" if owner is None else name(owner),
            marker=dict(symbol="square", size=marker_px, color=g["color"], line=dict(width=0.5, color="#999999")),
            text=g["text"], textfont=dict(size=font_px, color=g["font"]), textposition="middle center",
            hovertext=g["hover"], hoverinfo="text", showlegend=owner is not None))
    for trace_name, slots, width_px, color in (("read", read, 2, "#555555"),
                                               ("highlight", highlight, 4, HIGHLIGHT_COLOR)):
        slots = [s for s in slots if 0 <= s < num_blocks * block_size]
        pts = [xy(s) for s in slots]
        data.append(dict(
            type="scatter", x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=trace_name,
            showlegend=False, marker=dict(symbol="square-open", size=marker_px + 2, color=color,
                                          line=dict(width=width_px, color=color)),
            customdata=list(slots), hoverinfo="skip"))
    blocks = list(range(num_blocks))
    data.append(dict(
        type="scatter", x=[(b // rows) * stride - 0.95 for b in blocks], y=[b % rows for b in blocks], mode="text",
        text=[str(b) for b in blocks], textfont=dict(size=font_px, color="#555555"), name="block ids",
        showlegend=False, hoverinfo="skip"))
    top, bottom = (40 if title else 8), 34
    layout = title_layout(title, rows * cell_px + top + bottom, top=top, bottom=bottom)
    layout.update(
        width=fig_width, legend=dict(orientation="h", y=-0.01, yanchor="top", x=0),
        xaxis=dict(visible=False, range=[x_min, x_max], fixedrange=True),
        yaxis=dict(visible=False, range=[rows - 0.5, -0.5], fixedrange=True),
        meta=dict(alt=pool_record(num_blocks, tables, {s: name(s) for s in tables})))  # its text alternative
    return make_figure(data, layout)


def pool_html(num_blocks: int, block_size: int, tables: Mapping[int, Sequence[int]],
              cached_counts: Mapping[int, int], highlight: Iterable[int] = (), read: Iterable[int] = (),
              labels: Mapping[int, str] | None = None, max_width: int = 820,
              token_text: Mapping[int, Sequence[str]] | None = None, words: PoolWords = PoolWords(),
              holds: Mapping[int, tuple[int, int]] | None = None) -> str:
    """The pool grid of pool_figure as HTML (a step redraws it in a few ms, a plotly grid in ~100): the same block
    columns (wrapping to a new line in a narrow column), cells, colours, printed labels, outlines (class pp-hl for
    `highlight`, pp-read for `read`) and a legend of the sequences; each cell's tooltip (title) is the figure's
    hover text as a learner reads it (<br> a line break, entities decoded). Arguments as pool_figure's (the title
    goes above it: ui.widgets.show_cells). holds: the pool's contents (grid_cells): a cell holding what its tables
    do not expect gets class pp-wrong or pp-missing (an inset square, solid or dashed, as the bug lab marks a cell
    written wrongly), and the legend names the marks shown."""
    labels = dict(labels or {})
    cols = grid_columns(num_blocks, block_size)
    rows = math.ceil(num_blocks / cols)
    extent = 1.6 + (cols - 1) * (block_size + 1.6) + block_size + 0.5  # as pool_figure's x range, in cells
    cell_px = max(12, min(36, int((max_width - 20) / extent)))
    font_px = max(7, min(11, int(cell_px * 0.38)))
    highlight = {s for s in highlight}
    read = {s for s in read} - highlight
    cells = grid_cells(num_blocks, block_size, tables, cached_counts, labels, token_text, words, holds)
    columns = []
    for col in range(cols):
        blocks = []
        for block in range(col * rows, min(num_blocks, (col + 1) * rows)):
            spans = []
            for cell in cells[block * block_size:(block + 1) * block_size]:
                extra = " pp-hl" if cell["slot"] in highlight else " pp-read" if cell["slot"] in read else ""
                extra += f" pp-{cell['damage']}" if cell["damage"] else ""
                tip = html.escape(html.unescape(cell["hover"].replace("<br>", "\n"))).replace("\n", "&#10;")
                text = html.escape(cell["text"]) if cell_px >= 22 else ""
                spans.append(f'<span class="pp-cell{extra}" data-slot="{cell["slot"]}" style="background:'
                             f'{cell["color"]};color:{cell["font"]}" title="{tip}">{text}</span>')
            blocks.append(f'<div class="pp-block"><span class="pp-id">{block}</span>{"".join(spans)}</div>')
        columns.append(f'<div class="pp-col">{"".join(blocks)}</div>')
    owners = sorted({c["owner"] for c in cells if c["owner"] is not None})
    legend = "".join(f'<span class="pp-key"><span style="background:{seq_color(s)}"></span>'
                     f'{html.escape(labels.get(s, seq_label(s)))}</span>' for s in owners)
    for damage in ("wrong", "missing"):
        if any(c["damage"] == damage for c in cells):
            legend += (f'<span class="pp-key pp-mark-{damage}"><span></span>'
                       f'{html.escape(getattr(words, damage + "_key"))}</span>')
    # the grid's width in cells (ids and gaps included): presenter mode sizes cells so every column fits one line
    span = cols * (block_size + 1.3) + (cols - 1) * 0.3 + 0.5
    record = pool_record(num_blocks, tables, {s: labels.get(s, seq_label(s)) for s in tables})
    return (f'<div class="paged-pool"{alt_attr(record)} '
            f'style="--pp-cell:{cell_px}px;--pp-span:{span:.1f};font-size:{font_px}px">'
            f'<div class="pp-grid">{"".join(columns)}</div><div class="pp-legend">{legend}</div></div>')


def read_pool(markup: str) -> list[dict]:
    """The cells of pool_html markup in slot order: {"slot", "classes", "color", "font", "title", "text"}."""
    found = re.findall(r'<span class="pp-cell([^"]*)" data-slot="(\d+)" style="background:([^;]*);color:([^"]*)" '
                       r'title="([^"]*)">([^<]*)</span>', markup)
    return [{"slot": int(slot), "classes": cls.split(), "color": color, "font": font, "title": html.unescape(title),
             "text": html.unescape(text)} for cls, slot, color, font, title, text in found]
