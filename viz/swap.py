"""The swap page's pictures: the pool and the swap pool as rows of block cells (HTML, viz.cells' style), and the
measured cost of both modes by block size (plotly bars on a log axis). Pure: data in, markup or figure out."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from .colors import FREE_COLOR, seq_color, seq_label, text_color
from .figure import make_figure, title_layout


@dataclass(frozen=True)
class SwapWords:
    """Row names and tooltips (English by default; the page passes its language's). Tooltip fields: {pool} (the
    row's name), {block} (its id), {seq} (label), {logical} (logical block), {what} (left / arrived /
    handed / ""); handed: {prev}, the sequence that left a block another took in the same step."""

    pool: str = "KV pool"
    swap_pool: str = "swap pool (host)"
    held: str = "{pool} block {block}: {seq}, logical block {logical}{what}"
    free: str = "{pool} block {block}: free{what}"
    left: str = " (left this step)"
    arrived: str = " (arrived this step)"
    handed: str = " (taken this step; {prev} left it in the same step)"


def _owners(tables: Mapping[int, Sequence[int]]) -> dict[int, tuple[int, int]]:
    """block -> (seq id, logical block) of its first holder (shared blocks: the lowest seq id)."""
    out: dict[int, tuple[int, int]] = {}
    for sid in sorted(tables):
        for logical, block in enumerate(tables[sid]):
            out.setdefault(block, (sid, logical))
    return out


def _pool_row(name: str, num_blocks: int, tables: Mapping[int, Sequence[int]], left: set[int], arrived: set[int],
              words: SwapWords, kind: str, handed: Mapping[int, tuple[int, int]] = {}) -> str:
    owners, cells = _owners(tables), []
    for block in range(num_blocks):
        what = words.left if block in left else words.arrived if block in arrived else ""
        extra = " pg-sched" if block in arrived else " pg-pre" if block in left else ""
        if block in handed and block in owners:  # left by one, taken by another: it arrived
            what, extra = words.handed.format(prev=seq_label(handed[block][0])), " pg-sched"
        if block in owners:
            sid, logical = owners[block]
            color, text = seq_color(sid), f"{seq_label(sid)}{logical}"
            tip = words.held.format(pool=name, block=block, seq=seq_label(sid), logical=logical, what=what)
        else:
            color, text, tip = FREE_COLOR, str(block), words.free.format(pool=name, block=block, what=what)
        cells.append(f'<span class="pg-cell{extra}" style="background:{color};color:{text_color(color)}" '
                     f'title="{html.escape(tip)}">{html.escape(text)}</span>')  # viz.cells.read_cells reads it
    return (f'<div class="pg-row" data-pool="{kind}"><div class="pg-name">{html.escape(name)}</div>'
            f'<div class="pg-list">{"".join(cells)}</div></div>')


def pools_html(num_blocks: int, tables: Mapping[int, Sequence[int]], swap_space: int,
               swap_tables: Mapping[int, Sequence[int]], swap_out: Mapping[int, Sequence[tuple[int, int]]],
               swap_in: Mapping[int, Sequence[tuple[int, int]]], freed: Mapping[int, Sequence[int]] = (),
               words: SwapWords = SwapWords(), handed: Mapping[int, tuple[int, int]] = {}) -> str:
    """The pool (num_blocks cells) and, when swap_space > 0, the swap pool: each held block in its sequence's colour
    with "<label><logical block>" printed. Blocks a sequence left this step (swapped out, or freed by a recompute
    preemption: `freed`) get a dashed circle; blocks that arrived (swap-out destinations in the swap pool, swap-in
    destinations in the pool) a thick outline, as do blocks one sequence left and another took in the
    same step (`handed`: block -> (seq that left it, seq that took it); their tooltip names both)."""
    freed = dict(freed or {})
    left_pool = {a for pairs in swap_out.values() for a, _ in pairs} | {b for bs in freed.values() for b in bs}
    arrived_pool = {b for pairs in swap_in.values() for _, b in pairs}
    left_swap = {a for pairs in swap_in.values() for a, _ in pairs}
    arrived_swap = {b for pairs in swap_out.values() for _, b in pairs}
    rows = [_pool_row(words.pool, num_blocks, tables, left_pool - arrived_pool, arrived_pool, words, "pool",
                      handed)]
    if swap_space:
        rows.append(_pool_row(words.swap_pool, swap_space, swap_tables, left_swap - arrived_swap, arrived_swap, words,
                              "swap"))
    return '<div class="paged-cells pg-ringed">' + "".join(rows) + "</div>"  # room for the rings (viz.cells)


@dataclass(frozen=True)
class CostWords:
    title: str = "Preempting one sequence of {tokens} tokens, by block size (best of {repeats}, this machine)"
    swap: str = "swap out + in (one copy per direction)"
    per_block: str = "swap out + in (a copy per block and layer, as vLLM v0)"
    recompute: str = "recompute (prefill of every token)"
    x: str = "block_size (tokens per block)"
    y: str = "ms (log scale)"


def log_ticks(values: Sequence[float]) -> list[float]:
    """Ticks 1, 2, 5 per decade covering the positive `values` (a log axis labelled with its values:
    plotly's own minor labels read "2" for 0.2, 2 and 20). [] when none is positive. Raises nothing."""
    positive = [v for v in values if v > 0]
    if not positive:
        return []
    lo, hi = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    ticks = [float(f"{m * 10.0 ** e:.12g}") for e in range(lo, hi + 1) for m in (1, 2, 5)]
    first = max([t for t in ticks if t <= min(positive)], default=ticks[0])
    last = min([t for t in ticks if t >= max(positive)], default=ticks[-1])
    return [t for t in ticks if first <= t <= last]


def cost_figure(rows: Sequence[Mapping], tokens: int, repeats: int, words: CostWords = CostWords()):
    """Grouped bars: for each block size, the swap (batched, per block) and recompute times of bench.swap's rows."""
    x = [str(r["block_size"]) for r in rows]
    series = ((words.swap, "swap_ms", "#0072B2"), (words.per_block, "swap_per_block_ms", "#56B4E9"),
              (words.recompute, "recompute_ms", "#E69F00"))
    data = [dict(type="bar", name=name, x=x, y=[float(r[key]) for r in rows], marker=dict(color=color),
                 hovertemplate="%{x}: %{y:.3f} ms<extra>" + html.escape(name) + "</extra>")
            for name, key, color in series]
    layout = title_layout(words.title.format(tokens=tokens, repeats=repeats), 340, top=40, bottom=40)
    vals = log_ticks([y for trace in data for y in trace["y"]])
    layout.update(barmode="group", xaxis=dict(title=dict(text=words.x), type="category"),
                  yaxis=dict(title=dict(text=words.y), type="log", tickvals=vals,
                             ticktext=[f"{v:g}" for v in vals]),
                  legend=dict(orientation="h", y=-0.25))
    return make_figure(data, layout)
