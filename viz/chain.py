"""The address chain of one token, as a row of boxes joined by arrows:

    token_index → logical_block_id → physical_block_id → block_offset → slot (key_cache[block, offset])

with the block table drawn underneath and the entry the chain reads outlined. When the token's logical block has
no entry in the table, the chain is drawn up to that failure: the physical_block_id box and the table cell it
would read are outlined in vermillion ("no entry"), the slot is left blank.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .colors import HIGHLIGHT_COLOR, OKABE_ITO, ink, seq_color, text_color
from .figure import make_figure, title_layout

BOX_W, BOX_H, GAP = 2.2, 0.9, 0.35  # wide boxes, short arrows: each box's text fits at a 540 px plot
NAME_PX, BODY_PX, VALUE_PX = 11, 13, 15  # a box's name (italic); its rule and value; a value with no rule
MAX_TABLE = 14  # table entries drawn at most


MISSING = "—"  # a link that cannot be followed
BROKEN_COLOR = OKABE_ITO["vermillion"]
BROKEN_INK = ink(BROKEN_COLOR)  # the same hue, dark enough for text on white (AA 4.5:1)


def chain_links(token_index: int, block_size: int, block_table: Sequence[int], logical_block_id: int,
                physical_block_id: int | None, block_offset: int, slot: int | None) -> list[tuple[str, str, str]]:
    """(name, rule, value) for each link, the rule written with the numbers plugged in. physical_block_id None
    (the table has no entry for the logical block): that link and the slot are MISSING."""
    physical = MISSING if physical_block_id is None else str(physical_block_id)
    return [
        ("token_index", "", str(token_index)),
        ("logical_block_id", f"{token_index} // {block_size}", str(logical_block_id)),
        ("physical_block_id", f"block_table[{logical_block_id}]", physical),
        ("block_offset", f"{token_index} % {block_size}", str(block_offset)),
        ("slot", f"{physical}·{block_size} + {block_offset}", MISSING if slot is None else str(slot)),
    ]


def chain_figure(address, block_size: int, block_table: Sequence[int], seq_id: int = 0, title: str = "") -> go.Figure:
    """The chain for `address` (a paged.addressing.Address, or a lessons.address.MissingEntry whose
    physical_block_id and slot are None: drawn up to the missing table entry). Shapes: one rect per link, one per
    table cell drawn (the missing entries as dashed cells)."""
    links = chain_links(address.token_index, block_size, block_table, address.logical_block_id,
                        address.physical_block_id, address.block_offset, address.slot)
    broken = address.physical_block_id is None
    shapes, notes = [], []
    accent = seq_color(seq_id)
    for i, (name, rule, value) in enumerate(links):
        x0 = i * (BOX_W + GAP)
        fill = accent if name in ("physical_block_id", "slot") and not broken else "#F7F7F7"
        edge = (dict(color=BROKEN_COLOR, width=4) if broken and name == "physical_block_id" else
                dict(color="#AAAAAA", width=1.5, dash="dot") if value == MISSING else dict(color="#333333", width=1.5))
        shapes.append(dict(type="rect", x0=x0, x1=x0 + BOX_W, y0=0, y1=BOX_H, line=edge, fillcolor=fill,
                           layer="below"))
        body = f"<b>{value}</b>" if not rule else f"{rule}<br>= <b>{value}</b>"  # two short lines fit a narrow box
        ink = text_color(fill)
        notes.append(dict(x=x0 + BOX_W / 2, y=BOX_H * 0.76, text=f"<i>{name}</i>", showarrow=False,
                          font=dict(size=NAME_PX, color=ink)))
        notes.append(dict(x=x0 + BOX_W / 2, y=BOX_H * 0.34, text=body, showarrow=False,
                          font=dict(size=BODY_PX if rule else VALUE_PX, color=ink)))
        if i:
            notes.append(dict(x=x0 - 0.04, y=BOX_H / 2, ax=x0 - GAP + 0.04, ay=BOX_H / 2, xref="x", yref="y",
                              axref="x", ayref="y", text="", showarrow=True, arrowhead=2, arrowsize=1.2,
                              arrowwidth=1.8, arrowcolor="#333333"))
    # key_cache[block, offset] under the slot box, its right edge on the box's (centred, it would pass the figure's)
    last_x1 = (len(links) - 1) * (BOX_W + GAP) + BOX_W
    block = "?" if broken else address.physical_block_id
    notes.append(dict(x=last_x1, y=-0.28, text=f"key_cache[{block}, {address.block_offset}]", xanchor="right",
                      showarrow=False, font=dict(size=13, family="monospace", color=OKABE_ITO["blue"])))
    # the block table underneath the physical_block_id box, the entry read outlined
    # (a long table shows a window of MAX_TABLE entries around the one read)
    # (entries past the table's end, up to the logical block read, are drawn as dashed "missing" cells)
    cell = 0.42
    entries = [str(b) for b in block_table] + [""] * max(0, address.logical_block_id + 1 - len(block_table))
    lo = max(0, min(address.logical_block_id - MAX_TABLE // 2, len(entries) - MAX_TABLE))
    shown = list(enumerate(entries))[lo:lo + MAX_TABLE]
    x_start = 2 * (BOX_W + GAP) + BOX_W / 2 - len(shown) * cell / 2
    notes.append(dict(x=x_start - 0.08, y=-0.5, text="block_table" + (" …" if lo else ""), xanchor="right",
                      showarrow=False, font=dict(size=12, family="monospace")))
    if lo + MAX_TABLE < len(entries):
        notes.append(dict(x=x_start + len(shown) * cell + 0.05, y=-0.5, text="…", xanchor="left", showarrow=False))
    for k, (j, entry) in enumerate(shown):
        used, missing = j == address.logical_block_id, j >= len(block_table)
        line = (dict(color=BROKEN_COLOR, width=3 if used else 1, dash="dash") if missing else
                dict(color=HIGHLIGHT_COLOR if used else "#999999", width=3 if used else 1))
        shapes.append(dict(type="rect", x0=x_start + k * cell, x1=x_start + (k + 1) * cell, y0=-0.72, y1=-0.28,
                           line=line, fillcolor=accent if used and not missing else "white"))
        notes.append(dict(x=x_start + (k + 0.5) * cell, y=-0.5, text="?" if missing and used else entry,
                          showarrow=False, font=dict(size=12, color=BROKEN_INK if missing else "#000000")))
        notes.append(dict(x=x_start + (k + 0.5) * cell, y=-0.86, text=str(j), showarrow=False,
                          font=dict(size=9, color="#666666")))  # 5.7:1 on white (AA: 4.5)
    total = len(links) * (BOX_W + GAP) - GAP
    layout = title_layout(title, 230, bottom=8)
    layout.update(shapes=shapes, annotations=notes, showlegend=False,
                  xaxis=dict(visible=False, range=[-0.1, total + 0.1], fixedrange=True),
                  yaxis=dict(visible=False, range=[-1.0, BOX_H + 0.1], fixedrange=True))
    return make_figure([], layout)
