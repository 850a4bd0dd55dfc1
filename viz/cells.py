"""Small grids of labelled cells as HTML (not plotly figures): the engine's queues, one step's slot_mapping and the
twins' per-step logits difference (bars on a log axis).

Both change every step and are a few dozen coloured squares with a label: as HTML they cost the browser a few
milliseconds to redraw, as a plotly figure ~100 ms. Data in, markup out (one line, no blank line: Markdown would end
the block there); hover text is each cell's tooltip (title). CELLS_CSS / PRESENT_CELLS_CSS are their style sheets
(ui.present injects them). One colour and label per sequence, as in the pool grid (colors.seq_color / seq_label).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Sequence

from .colors import OKABE_ITO, seq_color, seq_label, text_color

LANES = ("waiting", "running", "finished")
CELLS_CSS = """
.paged-cells { display: flex; flex-direction: column; gap: 4px; margin: 0.2rem 0 0.6rem 0; }
.paged-cells .pg-row { display: flex; align-items: flex-start; gap: 0.6rem; }
.paged-cells .pg-name { flex: 0 0 5.5rem; font-size: 0.8rem; line-height: 26px; text-align: right; color: #333333;
    overflow-wrap: anywhere; word-break: keep-all; }  /* a name wraps at its spaces, not inside a Chinese word */
.paged-cells .pg-list { display: flex; flex-wrap: wrap; gap: 3px; min-height: 26px; min-width: 0; }
.paged-cells .pg-cell { box-sizing: border-box; width: 26px; height: 26px; line-height: 24px; text-align: center;
    font-size: 0.62rem; border: 0.5px solid #333333; border-radius: 2px; overflow: hidden; cursor: default; }
.paged-cells .pg-big { width: 30px; height: 30px; line-height: 28px; font-size: 0.8rem; margin: 3px; }
.paged-cells .pg-sched { outline: 3px solid #000000; outline-offset: 2px; }
.paged-cells .pg-pre { outline: 2px dashed #000000; outline-offset: 3px; border-radius: 50%; }
.paged-cells.pg-ringed { padding-top: 9px; gap: 10px; }
.paged-cells.pg-ringed .pg-list { gap: 9px 7px; }
.paged-bars { display: grid; grid-template-columns: auto 1fr; gap: 0 6px; margin: 0.2rem 0 0.6rem 0;
    font-size: 0.75rem; color: #333333; }
.paged-bars .pb-ytitle { grid-column: 1 / 3; }
.paged-bars .pb-yaxis { position: relative; width: 2.6rem; }
.paged-bars .pb-yaxis span { position: absolute; right: 0; transform: translateY(50%); line-height: 1; }
.paged-bars .pb-plot { position: relative; display: flex; align-items: flex-end; gap: 1px; min-width: 0;
    border-left: 1px solid #999999; border-bottom: 1px solid #999999;
    background: repeating-linear-gradient(to top, #FFFFFF 0, #FFFFFF calc(20% - 1px), #E5E5E5 calc(20% - 1px),
    #E5E5E5 20%); }
.paged-bars .pb-slot { flex: 1 1 0; max-width: 60px; height: 100%; display: flex; align-items: flex-end;
    min-width: 0; }
.paged-bars .pb-bar { display: block; width: 100%; cursor: default; }
.paged-bars .pb-tol { position: absolute; left: 0; right: 0; border-top: 1px dashed #000000; pointer-events: none; }
.paged-bars .pb-xaxis { grid-column: 2; display: flex; gap: 1px; }
.paged-bars .pb-xaxis span { flex: 1 1 0; max-width: 60px; min-width: 0; text-align: center; overflow: visible;
    white-space: nowrap; }
.paged-bars .pb-xtitle { grid-column: 2; text-align: center; }
.paged-pool { margin: 0.2rem 0 0.6rem 0; }
.paged-pool .pp-grid { display: flex; flex-wrap: wrap; gap: calc(var(--pp-cell) * 0.5) calc(var(--pp-cell) * 0.3); }
.paged-pool .pp-block { display: flex; height: var(--pp-cell); }
.paged-pool .pp-id { width: calc(var(--pp-cell) * 1.3); line-height: var(--pp-cell); text-align: right;
    padding-right: 3px; color: #555555; box-sizing: border-box; }
.paged-pool .pp-cell { box-sizing: border-box; width: var(--pp-cell); height: var(--pp-cell); margin: 0;
    border: 1.5px solid #FFFFFF; outline: 0.5px solid #999999; outline-offset: -1.5px;
    line-height: calc(var(--pp-cell) - 3px); text-align: center; overflow: hidden; white-space: nowrap;
    cursor: default; }
.paged-pool .pp-cell.pp-read { outline: 2px solid #555555; outline-offset: -1px; position: relative; }
.paged-pool .pp-cell.pp-hl { outline: 3px solid #000000; outline-offset: -1px; position: relative; z-index: 1; }
.paged-pool .pp-cell:is(.pp-wrong, .pp-missing) { position: relative; }
.paged-pool .pp-cell:is(.pp-wrong, .pp-missing)::after, .paged-pool .pp-key:is(.pp-mark-wrong, .pp-mark-missing) span {
    content: ""; position: absolute; inset: 3px; border: 2px solid #000000; pointer-events: none; }
.paged-pool .pp-cell.pp-missing::after, .paged-pool .pp-key.pp-mark-missing span { border-style: dashed; }
.paged-pool .pp-key:is(.pp-mark-wrong, .pp-mark-missing) span { position: static; background: #FFFFFF;
    box-sizing: border-box; border-width: 2px; }
.paged-pool .pc-plot { position: relative; }
.paged-pool .pc-plot img { display: block; width: 100%; }
.paged-pool .pc-dot { position: absolute; width: 12px; height: 12px; margin: -6px 0 0 -6px; border-radius: 50%;
    cursor: default; }
.paged-pool .pp-legend { display: flex; flex-wrap: wrap; gap: 0.8rem; margin-top: 0.3rem; font-size: 0.8rem; }
.paged-pool .pp-key span { display: inline-block; width: 0.8rem; height: 0.8rem; margin-right: 0.3rem;
    vertical-align: -0.1rem; border: 0.5px solid #333333; }
"""
PRESENT_CELLS_CSS = """
.paged-cells .pg-name { font-size: 16px; flex-basis: 7rem; line-height: 36px; }
.paged-cells .pg-cell { width: 36px; height: 36px; line-height: 34px; font-size: 16px; }
.paged-cells .pg-list { min-height: 36px; }
.paged-bars { font-size: 16px; }
.paged-bars .pb-yaxis { width: 3.4rem; }
.paged-pool { font-size: 16px !important;
    --pp-cell: clamp(30px, calc(100cqw / var(--pp-span, 20) - 1px), 44px) !important; }
.paged-pool .pp-legend { font-size: 16px; }
.paged-pool .pc-plot { max-width: none !important; }
"""


def _cell(text: str, color: str, tip: str, extra: str = "") -> str:
    return (f'<span class="pg-cell{extra}" style="background:{color};color:{text_color(color)}" '
            f'title="{html.escape(tip)}">{html.escape(text)}</span>')


def _row(name: str, cells: list[str], tick: str = "") -> str:
    return (f'<div class="pg-row"{tick}><div class="pg-name">{html.escape(name)}</div>'
            f'<div class="pg-list">{"".join(cells)}</div></div>')


@dataclass(frozen=True)
class QueueWords:
    """The scheduler's lanes and each square's tooltip (English by default; a page passes its language's, from
    ui/strings). waiting / running / finished: the lane names; cell: the tooltip, format fields {seq} (the label, A)
    {seq_id} (its number) {lane} (the lane's name)."""

    waiting: str = "waiting"
    running: str = "running"
    finished: str = "finished"
    cell: str = "{seq} (seq {seq_id}): {lane}"


def queues_html(waiting: Sequence[int], running: Sequence[int], finished: Sequence[int],
                preempted: Sequence[int] = (), scheduled: Sequence[int] = (),
                words: QueueWords = QueueWords()) -> str:
    """Three lanes of sequence squares (label printed, coloured per sequence). Sequences scheduled this step get a
    thick black outline (class pg-sched); preempted ones (back at the front of waiting) a dashed circle (pg-pre).
    Each lane row carries data-lane="waiting" / "running" / "finished"; its name and the tooltips are `words`."""
    scheduled, preempted = set(scheduled), set(preempted)
    rows = []
    for key, ids in zip(LANES, (waiting, running, finished)):
        lane = getattr(words, key)
        cells = [_cell(seq_label(s), seq_color(s), words.cell.format(seq=seq_label(s), seq_id=s, lane=lane),
                       " pg-big" + (" pg-sched" if s in scheduled else "") + (" pg-pre" if s in preempted else ""))
                 for s in ids]
        rows.append(_row(lane, cells, f' data-lane="{key}"'))
    return '<div class="paged-cells">' + "".join(rows) + "</div>"


@dataclass(frozen=True)
class SlotWords:
    """The slot_mapping cells' tooltip (English by default; a page passes its language's, from ui/strings). Format
    fields: token {seq} {position} {logical} {offset} {slot} {where}; place {block} {offset}; skipped (slot -1)."""

    token: str = "{seq} token {position} → logical block {logical}, offset {offset} → slot {slot} ({where})"
    place: str = "physical block {block}, offset {offset}"
    skipped: str = "skipped: -1 is no slot, nothing is written"


def slot_mapping_html(entries: Sequence[tuple[int, Sequence[int], Sequence[int]]], block_size: int,
                      max_cols: int = 24, words: SlotWords = SlotWords()) -> str:
    """One step's slot_mapping: entries are (seq_id, positions, slots) in feed order; each fed token is a cell
    coloured by its sequence with its slot printed (-1 = skipped), one row per sequence wrapping after `max_cols`
    cells. Tooltip (`words`): token position → logical block, offset → slot → physical block. ValueError when a
    sequence's positions and slots differ in length or block_size < 1."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    rows = []
    for seq_id, positions, slots in entries:
        if len(positions) != len(slots):
            raise ValueError(f"sequence {seq_id}: {len(positions)} positions but {len(slots)} slots")
        label, color = seq_label(seq_id), seq_color(seq_id)
        cells = []
        for p, s in zip(positions, slots):
            where = words.place.format(block=s // block_size, offset=s % block_size) if s >= 0 else words.skipped
            cells.append(_cell(str(s), color, words.token.format(seq=label, position=p, logical=p // block_size,
                                                                 offset=p % block_size, slot=s, where=where)))
        width = f' style="max-width:{max_cols * 29}px"'
        rows.append(f'<div class="pg-row"><div class="pg-name">{label}</div><div class="pg-list"{width}>'
                    f'{"".join(cells)}</div></div>')
    return '<div class="paged-cells">' + "".join(rows) + "</div>"


@dataclass(frozen=True)
class TwinWords:
    """The twins' chart tooltips (English by default; a page passes its language's, from ui/strings). Format fields:
    bar {step} {diff} (as 3.00e-07) {verdict} (✔ or ✗); tolerance {tolerance} (as 1e-04), the dashed line's."""

    bar: str = "step {step}: {diff} {verdict}"
    tolerance: str = "tolerance {tolerance}"


def twin_bars(steps: Sequence[int], diffs: Sequence[float], agree: Sequence[bool],
              tolerance: float, words: TwinWords = TwinWords()) -> list[dict]:
    """Per step, what the twins' chart shows: {"step", "diff", "shown" (an exact 0 drawn at the floor of the log
    axis), "ok" (tokens agreed and diff <= tolerance), "color" (blue ok / vermillion not), "hover" (words.bar)}.
    Used by twin_diff_html. ValueError when the lengths differ or tolerance <= 0."""
    if not len(steps) == len(diffs) == len(agree):
        raise ValueError(f"steps, diffs and agree must have one length, got {len(steps)}, {len(diffs)}, {len(agree)}")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    floor = min(tolerance * 1e-5, 1e-9)
    out = []
    for s, d, a in zip(steps, diffs, agree):
        ok = bool(a) and d <= tolerance
        out.append({"step": s, "diff": d, "shown": max(d, floor), "ok": ok,
                    "color": OKABE_ITO["blue"] if ok else OKABE_ITO["vermillion"],
                    "hover": words.bar.format(step=s, diff=f"{d:.2e}", verdict="✔" if ok else "✗")})
    return out


LOG_RANGE = (-10, 0)  # the twins' y axis: 1e-10 … 1e0


def _log_frac(value: float) -> float:
    """Where `value` sits on the LOG_RANGE axis, 0 (bottom) … 1 (top), clipped."""
    lo, hi = LOG_RANGE
    return min(1.0, max(0.0, (math.log10(value) - lo) / (hi - lo)))


def twin_diff_html(steps: Sequence[int], diffs: Sequence[float], agree: Sequence[bool], tolerance: float,
                   x_title: str = "step", y_title: str = "max |Δlogits|", height_px: int = 150,
                   words: TwinWords = TwinWords(), first_step: int = 1) -> str:
    """The twins' logits difference per step as HTML bars on a log axis (1e-10 … 1e0), one slot per step
    first_step … max(last step, first_step + 9), a dashed line at `tolerance`: bars and colours from twin_bars, its
    hover as each bar's title (`words`); the browser redraws it in a few ms. A page showing only its newest steps
    passes those and the first of them (the cost then follows the steps shown). ValueError as twin_bars, or for a
    step < first_step (or first_step < 1)."""
    bars = twin_bars(steps, diffs, agree, tolerance, words)
    if first_step < 1 or any(b["step"] < first_step for b in bars):
        raise ValueError(f"steps must be >= first_step >= 1, got {min([b['step'] for b in bars] + [first_step])}")
    last = max([b["step"] for b in bars] + [first_step + 9])
    by_step = {b["step"]: b for b in bars}
    dtick = max(1, -(-(last - first_step + 1) // 10))
    slots, ticks = [], []
    for s in range(first_step, last + 1):
        b = by_step.get(s)
        bar = (f'<span class="pb-bar" data-step="{s}" style="height:{100 * _log_frac(b["shown"]):.2f}%;'
               f'background:{b["color"]}" title="{html.escape(b["hover"])}"></span>') if b else ""
        slots.append(f'<div class="pb-slot">{bar}</div>')
        ticks.append(f"<span>{s if s % dtick == 0 or s == first_step else ''}</span>")
    lo, hi = LOG_RANGE
    ylabels = "".join(f'<span style="bottom:{100 * (e - lo) / (hi - lo):.0f}%">1e{e}</span>'
                      for e in range(lo, hi + 1, 2))
    tol = (f'<div class="pb-tol" style="bottom:{100 * _log_frac(tolerance):.2f}%" '
           f'title="{html.escape(words.tolerance.format(tolerance=f"{tolerance:.0e}"))}"></div>')
    return (f'<div class="paged-bars"><div class="pb-ytitle">{html.escape(y_title)}</div>'
            f'<div class="pb-yaxis" style="height:{height_px}px">{ylabels}</div>'
            f'<div class="pb-plot" style="height:{height_px}px">{tol}{"".join(slots)}</div>'
            f'<div class="pb-xaxis">{"".join(ticks)}</div><div class="pb-xtitle">{html.escape(x_title)}</div></div>')


def read_bars(markup: str) -> list[dict]:
    """The bars of twin_diff_html markup, in order: {"step", "height" (percent), "color", "title"}."""
    found = re.findall(r'<span class="pb-bar" data-step="(\d+)" style="height:([0-9.]+)%;background:([^"]*)" '
                       r'title="([^"]*)"></span>', markup)
    return [{"step": int(s), "height": float(h), "color": c, "title": html.unescape(t)} for s, h, c, t in found]


def read_cells(markup: str) -> list[dict]:
    """The cells of queues_html / slot_mapping_html markup, in order: {"text", "title", "classes", "color"} (what
    tests read back)."""
    found = re.findall(r'<span class="pg-cell([^"]*)" style="background:([^;]*);[^"]*" title="([^"]*)">([^<]*)</span>',
                       markup)
    return [{"classes": cls.split(), "color": color, "title": html.unescape(title), "text": html.unescape(text)}
            for cls, color, title, text in found]
