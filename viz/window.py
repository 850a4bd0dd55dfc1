"""Page 11's block tables as HTML cells: each request's logical blocks left to right, the physical block behind
each, its tokens slot by slot, the holes a sliding window left at the front, and the tokens the next token reads.

Data in, markup out (one line: Markdown would end the block at a blank line); tooltips carry the full address
(logical block, physical block, slot). One colour per request (colors.seq_color), the label printed in the row.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Sequence

from .colors import FREE_COLOR, seq_color, seq_label, text_color, tint

WINDOW_CSS = """<style>
.pw-rows { display: flex; flex-direction: column; gap: 10px; margin: 0.2rem 0 0.6rem 0; font-size: 0.75rem; }
.pw-row { display: flex; align-items: flex-start; gap: 0.6rem; }
.pw-name { flex: 0 0 5.5rem; text-align: right; line-height: 30px; color: #333333; }
.pw-blocks { display: flex; flex-wrap: wrap; gap: 6px; min-width: 0; }
.pw-block { display: flex; flex-direction: column; align-items: stretch; gap: 2px; }
.pw-head { text-align: center; color: #333333; white-space: nowrap; }
.pw-slots { display: flex; gap: 1px; }
.pw-slot { box-sizing: border-box; width: 26px; height: 26px; line-height: 24px; text-align: center;
    border: 0.5px solid #333333; overflow: hidden; white-space: nowrap; cursor: default; }
.pw-slot.pw-read { outline: 3px solid #000000; outline-offset: -2px; }
.pw-slot.pw-next { border: 2px dashed #000000; }
.pw-hole { box-sizing: border-box; height: 26px; line-height: 24px; text-align: center; color: #555555;
    border: 1px dashed #777777; background: repeating-linear-gradient(45deg, #F4F4F4 0, #F4F4F4 4px,
    #E0E0E0 4px, #E0E0E0 8px); cursor: default; }
.pw-freed-now { outline: 3px solid #D55E00; outline-offset: 1px; }
.pw-big { font-size: 16px; }
.pw-big .pw-name { flex-basis: 7rem; line-height: 40px; }
.pw-big .pw-slot { width: 38px; height: 38px; line-height: 36px; }
.pw-big .pw-hole { height: 38px; line-height: 36px; }
</style>"""


@dataclass(frozen=True)
class WindowWords:
    """The figure's words (a page passes its language's). request: a row's name, field {seq}; hole: a freed
    block's head, {logical}; hole_now: the head of a block the shown step freed, {logical}, {physical}; slot: a
    token's tooltip, {token}, {text}, {logical}, {physical}, {slot}; empty: an unwritten slot's tooltip; next: the
    next token's. A live block's head is the notation L<logical> → P<physical>, the same in every language."""

    request: str = "request {seq}"
    hole: str = "L{logical}: freed"
    hole_now: str = "L{logical}: P{physical} freed now"
    slot: str = "token {token} “{text}”: logical block {logical}, physical block {physical}, slot {slot}"
    empty: str = "not written yet"
    next: str = "the next token: it reads the outlined tokens"


def cell_text(label: str, width: int = 3) -> str:
    """A token label shortened to fit a cell of `width` characters: a named token (⟨SEP⟩, ⟨0x0A⟩)
    loses its brackets first ("SEP"), anything longer is cut with "…"; the hover keeps the whole
    label. Raises nothing."""
    if len(label) > width and label.startswith("⟨") and label.endswith("⟩"):
        label = label[1:-1]
    return label if len(label) <= width else label[:width - 1] + "…"


def _slot(text: str, color: str, tip: str, extra: str = "") -> str:
    return (f'<span class="pw-slot{extra}" style="background:{color};color:{text_color(color)}" '
            f'title="{html.escape(tip)}">{html.escape(text)}</span>')


def window_table_html(rows: Sequence[tuple[int, Sequence[int], Sequence[str], int, int | None, Sequence[int]]],
                      block_size: int, words: WindowWords = WindowWords(), big: bool = False) -> str:
    """rows: (seq_id, block_table (-1 = hole), token label per token index, cached_token_count, first token the
    next token reads (None: no window drawn for this row), the table before the step shown). Cached tokens are
    filled in the request's colour; those the next token reads are outlined; the next token's slot is dashed; a
    hole the step made is ringed and names the physical block it released. big: projector sizes (presenter mode)."""
    out = [WINDOW_CSS, f'<div class="pw-rows{" pw-big" if big else ""}">']
    cell = 39 if big else 27
    for seq_id, table, labels, cached, first_read, before in rows:
        color = seq_color(seq_id)
        blocks = []
        for logical, physical in enumerate(table):
            if physical < 0:
                was = before[logical] if logical < len(before) else -1
                head = (words.hole_now.format(logical=logical, physical=was) if was >= 0
                        else words.hole.format(logical=logical))
                ring = " pw-freed-now" if was >= 0 else ""
                blocks.append(f'<div class="pw-block{ring}"><div class="pw-head">{html.escape(head)}</div>'
                              f'<div class="pw-hole" style="width:{block_size * cell - 1}px" '
                              f'title="{html.escape(head)}">—</div></div>')
                continue
            slots = []
            for offset in range(block_size):
                token = logical * block_size + offset
                slot = physical * block_size + offset
                if token < cached:
                    text = labels[token] if token < len(labels) else "?"
                    read = first_read is not None and token >= first_read
                    tip = words.slot.format(token=token, text=text, logical=logical, physical=physical,
                                            slot=slot)
                    slots.append(_slot(cell_text(text), color, tip, " pw-read" if read else ""))
                elif token == cached and first_read is not None:
                    shown = cell_text(labels[token]) if token < len(labels) else ""
                    slots.append(_slot(shown, tint(color, 0.35), words.next, " pw-next"))
                else:
                    slots.append(_slot("", FREE_COLOR, words.empty))
            blocks.append(f'<div class="pw-block"><div class="pw-head">'
                          f'L{logical} → P{physical}</div>'
                          f'<div class="pw-slots">{"".join(slots)}</div></div>')
        name = words.request.format(seq=seq_label(seq_id))
        out.append(f'<div class="pw-row"><div class="pw-name">{html.escape(name)}</div>'
                   f'<div class="pw-blocks">{"".join(blocks)}</div></div>')
    out.append("</div>")
    return "".join(out)
