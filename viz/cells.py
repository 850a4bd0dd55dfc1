"""Small grids of labelled cells as HTML (not plotly figures): the engine's queues and one step's slot_mapping.

Both change every step and are a few dozen coloured squares with a label: as HTML they cost the browser a few
milliseconds to redraw, as a plotly figure ~100 ms. Data in, markup out (one line, no blank line: Markdown would end
the block there); hover text is each cell's tooltip (title). CELLS_CSS / PRESENT_CELLS_CSS are their style sheets
(ui.present injects them). One colour and label per sequence, as in the pool grid (colors.seq_color / seq_label).
"""

from __future__ import annotations

import html
import re
from typing import Sequence

from .colors import seq_color, seq_label, text_color

LANES = ("waiting", "running", "finished")
CELLS_CSS = """
.paged-cells { display: flex; flex-direction: column; gap: 4px; margin: 0.2rem 0 0.6rem 0; }
.paged-cells .pg-row { display: flex; align-items: flex-start; gap: 0.6rem; }
.paged-cells .pg-name { flex: 0 0 5.5rem; font-size: 0.8rem; line-height: 26px; text-align: right; color: #333333;
    overflow-wrap: anywhere; }
.paged-cells .pg-list { display: flex; flex-wrap: wrap; gap: 3px; min-height: 26px; min-width: 0; }
.paged-cells .pg-cell { box-sizing: border-box; width: 26px; height: 26px; line-height: 24px; text-align: center;
    font-size: 0.62rem; border: 0.5px solid #333333; border-radius: 2px; overflow: hidden; cursor: default; }
.paged-cells .pg-big { width: 30px; height: 30px; line-height: 28px; font-size: 0.8rem; margin: 3px; }
.paged-cells .pg-sched { outline: 3px solid #000000; outline-offset: 2px; }
.paged-cells .pg-pre { outline: 2px dashed #000000; outline-offset: 3px; border-radius: 50%; }
"""
PRESENT_CELLS_CSS = """
.paged-cells .pg-name { font-size: 16px; flex-basis: 7rem; line-height: 36px; }
.paged-cells .pg-cell { width: 36px; height: 36px; line-height: 34px; font-size: 16px; }
.paged-cells .pg-list { min-height: 36px; }
"""


def _cell(text: str, color: str, tip: str, extra: str = "") -> str:
    return (f'<span class="pg-cell{extra}" style="background:{color};color:{text_color(color)}" '
            f'title="{html.escape(tip)}">{html.escape(text)}</span>')


def _row(name: str, cells: list[str], tick: str = "") -> str:
    return (f'<div class="pg-row"{tick}><div class="pg-name">{html.escape(name)}</div>'
            f'<div class="pg-list">{"".join(cells)}</div></div>')


def queues_html(waiting: Sequence[int], running: Sequence[int], finished: Sequence[int],
                preempted: Sequence[int] = (), scheduled: Sequence[int] = (),
                lane_names: Sequence[str] = LANES) -> str:
    """Three lanes of sequence squares (label printed, coloured per sequence). Sequences scheduled this step get a
    thick black outline (class pg-sched); preempted ones (back at the front of waiting) a dashed circle (pg-pre).
    Each lane row carries data-lane="waiting" / "running" / "finished"."""
    scheduled, preempted = set(scheduled), set(preempted)
    rows = []
    for lane, (key, ids) in enumerate(zip(LANES, (waiting, running, finished))):
        cells = [_cell(seq_label(s), seq_color(s), f"{seq_label(s)} (seq {s}): {lane_names[lane]}",
                       " pg-big" + (" pg-sched" if s in scheduled else "") + (" pg-pre" if s in preempted else ""))
                 for s in ids]
        rows.append(_row(lane_names[lane], cells, f' data-lane="{key}"'))
    return '<div class="paged-cells">' + "".join(rows) + "</div>"


def slot_mapping_html(entries: Sequence[tuple[int, Sequence[int], Sequence[int]]], block_size: int,
                      max_cols: int = 24) -> str:
    """One step's slot_mapping: entries are (seq_id, positions, slots) in feed order; each fed token is a cell
    coloured by its sequence with its slot printed (-1 = skipped), one row per sequence wrapping after `max_cols`
    cells. Tooltip: token position → logical block, offset → slot → physical block. ValueError when a sequence's
    positions and slots differ in length or block_size < 1."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    rows = []
    for seq_id, positions, slots in entries:
        if len(positions) != len(slots):
            raise ValueError(f"sequence {seq_id}: {len(positions)} positions but {len(slots)} slots")
        label, color = seq_label(seq_id), seq_color(seq_id)
        cells = []
        for p, s in zip(positions, slots):
            where = f"physical block {s // block_size}, offset {s % block_size}" if s >= 0 else "skipped"
            cells.append(_cell(str(s), color, f"{label} token {p} → logical block {p // block_size}, offset "
                                              f"{p % block_size} → slot {s} ({where})"))
        width = f' style="max-width:{max_cols * 29}px"'
        rows.append(f'<div class="pg-row"><div class="pg-name">{label}</div><div class="pg-list"{width}>'
                    f'{"".join(cells)}</div></div>')
    return '<div class="paged-cells">' + "".join(rows) + "</div>"


def read_cells(markup: str) -> list[dict]:
    """The cells of queues_html / slot_mapping_html markup, in order: {"text", "title", "classes", "color"} (what
    tests read back)."""
    found = re.findall(r'<span class="pg-cell([^"]*)" style="background:([^;]*);[^"]*" title="([^"]*)">([^<]*)</span>',
                       markup)
    return [{"classes": cls.split(), "color": color, "title": html.unescape(title), "text": html.unescape(text)}
            for cls, color, title, text in found]
