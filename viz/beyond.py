"""Page 7's "what comes next" figures, as HTML (data in, markup out; the words come from the caller):

    split_plan_html(partitions, shares, maxes, words)   the context cut into partitions, each one's share of the
                                                        softmax after the reduce, and the reduce box
    pool_grid_html(grid, seq_of, title)                 one layout's pool read from its own tensor: a cell per
                                                        (page, offset), labelled with the token it holds
"""

from __future__ import annotations

import html
from typing import Mapping, Sequence

from .colors import OKABE_ITO, seq_color, seq_label

PART_FILLS = (OKABE_ITO["sky_blue"], OKABE_ITO["yellow"], OKABE_ITO["bluish_green"], OKABE_ITO["orange"])
CSS = """<style>
.pg-split { display: flex; flex-wrap: wrap; gap: 0.25rem; align-items: stretch; margin: 0.3rem 0; }
.pg-split .pg-part { border: 1px solid #333; border-radius: 4px; padding: 0.2rem 0.35rem; font-size: 0.78rem;
    line-height: 1.3; min-width: 5.2rem; color: #000; }
.pg-split .pg-reduce { border: 2px solid #000; border-radius: 4px; padding: 0.2rem 0.5rem; font-size: 0.85rem;
    font-weight: 700; background: #FFFFFF; align-self: center; }
.pg-grid { border-collapse: collapse; font-family: monospace; font-size: 0.72rem; margin: 0.2rem 0 0.6rem 0; }
.pg-grid td, .pg-grid th { border: 1px solid #BBB; padding: 0.1rem 0.25rem; text-align: center; min-width: 2.1rem; }
.pg-grid th { background: #F2F2F2; font-weight: 600; }
.pg-title { font-weight: 600; font-size: 0.85rem; margin-top: 0.3rem; }
.pg-big .pg-part, .pg-big.pg-grid, .pg-big .pg-reduce, .pg-big.pg-title { font-size: 16px !important; }
</style>"""


def split_plan_html(partitions: Sequence[tuple[int, int, int]], shares: Sequence[float], maxes: Sequence[float],
                    sums: Sequence[float], words: Mapping[str, str], present: bool = False) -> str:
    """partitions: (index, first token, one past the last) each; shares / maxes / sums: that partition's weight
    after the reduce (fraction of the softmax mass), its max score m_p and its sum l_p (one head). words: "part"
    ("P{p}"), "tokens" ("tokens {start}…{end}"), "stats" ("m {m} · l {l}"), "share" ("{share} of the mass"),
    "reduce" (the reduce box's text), "more" ("… {count} more") for format. Long plans show their first 15
    partitions and their last one. `present`: text >= 16 px (presenter mode)."""
    if not (len(partitions) == len(shares) == len(maxes) == len(sums)):
        raise ValueError("partitions, shares, maxes and sums must have the same length")
    shown = list(range(len(partitions))) if len(partitions) <= 16 else [*range(15), None, len(partitions) - 1]
    boxes = []
    for i in shown:
        if i is None:  # the partitions between the first 15 and the last
            boxes.append(f'<div class="pg-part">{html.escape(words["more"].format(count=len(partitions) - 16))}</div>')
            continue
        p, start, end = partitions[i]
        fill = PART_FILLS[p % len(PART_FILLS)]
        text = "<br>".join(html.escape(x) for x in (
            words["part"].format(p=p), words["tokens"].format(start=start, end=end - 1),
            words["stats"].format(m=f"{maxes[i]:.2f}", l=f"{sums[i]:.3g}"),
            words["share"].format(share=f"{100 * shares[i]:.1f}%")))
        boxes.append(f'<div class="pg-part" style="background:{fill}">{text}</div>')
    boxes.append(f'<div class="pg-reduce">→ {html.escape(words["reduce"])}</div>')
    big = " pg-big" if present else ""
    return CSS + f'<div class="pg-split{big}">' + "".join(boxes) + "</div>"


def pool_grid_html(grid: Sequence[Sequence[int]], owner: Mapping[int, tuple[int, int]], title: str,
                   row_name: str, col_name: str, present: bool = False) -> str:
    """grid[r][c]: the number the tensor holds at page r, offset c (-1: empty); owner: number -> (seq, token)
    (display id, token index), shown as "A5" in the sequence's colour. row_name / col_name head the axes."""
    head = (f"<tr><th>{html.escape(row_name)} \\ {html.escape(col_name)}</th>"
            + "".join(f"<th>{c}</th>" for c in range(len(grid[0]) if grid else 0)) + "</tr>")
    rows = []
    for r, row in enumerate(grid):
        cells = []
        for value in row:
            if value in owner:
                seq, token = owner[value]
                cells.append(f'<td style="background:{seq_color(seq)}">{seq_label(seq)}{token}</td>')
            else:
                cells.append("<td></td>")
        rows.append(f"<tr><th>{r}</th>{''.join(cells)}</tr>")
    big = " pg-big" if present else ""
    return (CSS + f'<div class="pg-title{big}">{html.escape(title)}</div><table class="pg-grid{big}">' + head
            + "".join(rows) + "</table>")
