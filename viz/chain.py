"""The address chain of one token, as a row of boxes joined by arrows:

    token_index → logical_block_id → physical_block_id → block_offset → slot (key_cache[block, offset])

with the block table drawn underneath and the entry the chain reads outlined.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .colors import HIGHLIGHT_COLOR, OKABE_ITO, seq_color, text_color
from .figure import make_figure, title_layout

BOX_W, BOX_H, GAP = 1.9, 0.9, 0.55
MAX_TABLE = 14  # table entries drawn at most


def chain_links(token_index: int, block_size: int, block_table: Sequence[int], logical_block_id: int,
                physical_block_id: int, block_offset: int, slot: int) -> list[tuple[str, str, str]]:
    """(name, rule, value) for each link, the rule written with the numbers plugged in."""
    return [
        ("token_index", "", str(token_index)),
        ("logical_block_id", f"{token_index} // {block_size}", str(logical_block_id)),
        ("physical_block_id", f"block_table[{logical_block_id}]", str(physical_block_id)),
        ("block_offset", f"{token_index} % {block_size}", str(block_offset)),
        ("slot", f"{physical_block_id}·{block_size} + {block_offset}", str(slot)),
    ]


def chain_figure(address, block_size: int, block_table: Sequence[int], seq_id: int = 0, title: str = "") -> go.Figure:
    """The chain for `address` (a paged.addressing.Address). Shapes: one rect per link, one per table entry."""
    links = chain_links(address.token_index, block_size, block_table, address.logical_block_id,
                        address.physical_block_id, address.block_offset, address.slot)
    shapes, notes = [], []
    accent = seq_color(seq_id)
    for i, (name, rule, value) in enumerate(links):
        x0 = i * (BOX_W + GAP)
        fill = accent if name in ("physical_block_id", "slot") else "#F7F7F7"
        shapes.append(dict(type="rect", x0=x0, x1=x0 + BOX_W, y0=0, y1=BOX_H, line=dict(color="#333333", width=1.5),
                           fillcolor=fill, layer="below"))
        body = f"<b>{value}</b>" if not rule else f"{rule} = <b>{value}</b>"
        ink = text_color(fill)
        notes.append(dict(x=x0 + BOX_W / 2, y=BOX_H * 0.72, text=f"<i>{name}</i>", showarrow=False,
                          font=dict(size=12, color=ink)))
        notes.append(dict(x=x0 + BOX_W / 2, y=BOX_H * 0.3, text=body, showarrow=False,
                          font=dict(size=15, color=ink)))
        if i:
            notes.append(dict(x=x0 - 0.04, y=BOX_H / 2, ax=x0 - GAP + 0.04, ay=BOX_H / 2, xref="x", yref="y",
                              axref="x", ayref="y", text="", showarrow=True, arrowhead=2, arrowsize=1.2,
                              arrowwidth=1.8, arrowcolor="#333333"))
    # key_cache[block, offset] under the slot box
    last_x = (len(links) - 1) * (BOX_W + GAP) + BOX_W / 2
    notes.append(dict(x=last_x, y=-0.28, text=f"key_cache[{address.physical_block_id}, {address.block_offset}]",
                      showarrow=False, font=dict(size=13, family="monospace", color=OKABE_ITO["blue"])))
    # the block table underneath the physical_block_id box, the entry read outlined
    # (a long table shows a window of MAX_TABLE entries around the one read)
    cell = 0.42
    lo = max(0, min(address.logical_block_id - MAX_TABLE // 2, len(block_table) - MAX_TABLE))
    shown = list(enumerate(block_table))[lo:lo + MAX_TABLE]
    x_start = 2 * (BOX_W + GAP) + BOX_W / 2 - len(shown) * cell / 2
    notes.append(dict(x=x_start - 0.08, y=-0.5, text="block_table" + (" …" if lo else ""), xanchor="right",
                      showarrow=False, font=dict(size=12, family="monospace")))
    if lo + MAX_TABLE < len(block_table):
        notes.append(dict(x=x_start + len(shown) * cell + 0.05, y=-0.5, text="…", xanchor="left", showarrow=False))
    for k, (j, entry) in enumerate(shown):
        used = j == address.logical_block_id
        shapes.append(dict(type="rect", x0=x_start + k * cell, x1=x_start + (k + 1) * cell, y0=-0.72, y1=-0.28,
                           line=dict(color=HIGHLIGHT_COLOR if used else "#999999", width=3 if used else 1),
                           fillcolor=accent if used else "white"))
        notes.append(dict(x=x_start + (k + 0.5) * cell, y=-0.5, text=str(entry), showarrow=False,
                          font=dict(size=12, color="#000000")))
        notes.append(dict(x=x_start + (k + 0.5) * cell, y=-0.86, text=str(j), showarrow=False,
                          font=dict(size=9, color="#777777")))
    total = len(links) * (BOX_W + GAP) - GAP
    layout = title_layout(title, 230, bottom=8)
    layout.update(shapes=shapes, annotations=notes, showlegend=False,
                  xaxis=dict(visible=False, range=[-0.9, total + 0.1], fixedrange=True),
                  yaxis=dict(visible=False, range=[-1.0, BOX_H + 0.1], fixedrange=True))
    return make_figure([], layout)
