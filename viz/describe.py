"""Text alternatives: what a figure shows, in words, for a screen reader (WCAG 2.1 SC 1.1.1).

Built from the same data the figure is drawn from: a plotly figure's own dicts (its traces, axis titles and
annotations), or an HTML diagram's markup (viz.cells, viz.pool.pool_html). A builder whose figure means more than
its marks (the pool grid: blocks held per sequence) leaves a record of what it drew in `layout.meta["alt"]` (plotly)
or a `data-alt` attribute (HTML), and the sentence is made from that record:

    pool: 19 of 24 blocks free; A holds 7, 2, 9

ui.widgets.show_figure / show_cells put the sentence beside the figure in a visually hidden element. The words come
from AltWords (English by default; the app passes its language's, from ui/strings/a11y.py).
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

MAX_ITEMS = 12  # values or labels listed at most per trace; the rest are counted ("… and 5 more")


@dataclass(frozen=True)
class AltWords:
    """The sentences of a text alternative (English by default; ui/strings/a11y.py holds both languages).

    Format fields: pool {free} {num_blocks}; holds {seq} {blocks}; shared {blocks}; series {name} {n} {x} {x0} {x1}
    {y} {lo} {hi} {last}; values {name} {items}; grid {name} {rows} {cols} {lo} {hi}; more {n}."""

    figure: str = "Figure"
    pool: str = "pool: {free} of {num_blocks} blocks free"
    holds: str = "{seq} holds {blocks}"
    holds_none: str = "{seq} holds no block"
    shared: str = "shared by several sequences: {blocks}"
    series: str = "{name}: {n} points, {x} {x0} to {x1}, {y} from {lo} to {hi}, the last {last}"
    values: str = "{name}: {items}"
    grid: str = "{name}: {rows} × {cols} values from {lo} to {hi}"
    more: str = "… and {n} more"
    empty: str = "nothing drawn yet"
    sep: str = "; "


def number(value) -> str:
    """`value` as a figure prints it: a whole number without a point, else 3 significant digits ("—" for NaN)."""
    if isinstance(value, str):
        return value
    v = float(value)
    if math.isnan(v):
        return "—"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.3g}"


def _listed(items: Sequence[str], words: AltWords) -> str:
    head = ", ".join(items[:MAX_ITEMS])
    return head + (" " + words.more.format(n=len(items) - MAX_ITEMS) if len(items) > MAX_ITEMS else "")


def pool_record(num_blocks: int, tables: Mapping[int, Sequence[int]], labels: Mapping[int, str],
                ref_counts: Sequence[int] | None = None) -> dict:
    """What a pool figure drew, for its text alternative: {"kind": "pool", "num_blocks", "tables": [[label,
    [physical_block_id, …]], …] (by seq id), "shared": blocks with ref count > 1 (when ref_counts is given)}.
    Raises: ValueError when num_blocks < 1."""
    if num_blocks < 1:
        raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
    record = {"kind": "pool", "num_blocks": int(num_blocks),
              "tables": [[labels[s], [int(b) for b in tables[s]]] for s in sorted(tables)]}
    if ref_counts is not None:
        record["shared"] = [b for b, r in enumerate(ref_counts) if r > 1]
    return record


def pool_sentence(record: Mapping, words: AltWords = AltWords()) -> str:
    """The pool's sentence, e.g. "pool: 19 of 24 blocks free; A holds 7, 2, 9" (a block counts as held when some
    table lists it; entries outside the pool are listed but not counted). Raises: KeyError for a record without
    "num_blocks" or "tables"."""
    num_blocks = record["num_blocks"]
    held = {b for _, blocks in record["tables"] for b in blocks if 0 <= b < num_blocks}
    parts = [words.pool.format(free=num_blocks - len(held), num_blocks=num_blocks)]
    for label, blocks in record["tables"]:
        parts.append(words.holds.format(seq=label, blocks=_listed([str(b) for b in blocks], words)) if blocks
                     else words.holds_none.format(seq=label))
    if record.get("shared"):
        parts.append(words.shared.format(blocks=_listed([str(b) for b in record["shared"]], words)))
    return words.sep.join(parts)


def _array(value) -> list:
    """A trace's data as a flat list: plain lists as they are, plotly 7's {"dtype", "bdata", "shape"} decoded."""
    if value is None:
        return []
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return flat.tolist()
    if isinstance(value, np.ndarray):
        return value.ravel().tolist()
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_array(v) if isinstance(v, (list, tuple, np.ndarray, dict)) else [v])
        return out
    return [value]


def _rows(value) -> int:
    if isinstance(value, dict) and "shape" in value:
        shape = value["shape"]
        return int(str(shape).split(",")[0]) if shape else 1
    return len(value) if isinstance(value, (list, tuple, np.ndarray)) else 1


_TAGS = re.compile(r"<[^>]*>")


def plain(text) -> str:
    """Figure text without its markup: tags dropped (<br> a space), entities decoded, runs of space collapsed."""
    text = _TAGS.sub(" ", str(text).replace("<br>", " "))
    return " ".join(html.unescape(text).split())


def _axis_title(layout: Mapping, axis: str) -> str:
    title = (layout.get(axis) or {}).get("title")
    return plain(title.get("text", "") if isinstance(title, dict) else title or "")


def _numbers(values: Iterable) -> list[float]:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(f):
            out.append(f)
    return out


def _trace_sentence(trace: Mapping, layout: Mapping, words: AltWords) -> str | None:
    """One trace in words, or None for a trace drawn only as decoration (hoverinfo "skip", or empty)."""
    kind = trace.get("type", "scatter")
    name = plain(trace.get("name") or "") or words.figure
    x_title = _axis_title(layout, "xaxis" + (trace.get("xaxis") or "x")[1:]) or "x"  # "x2" -> layout.xaxis2
    y_title = _axis_title(layout, "yaxis" + (trace.get("yaxis") or "y")[1:]) or "y"
    if kind == "heatmap":
        z = _numbers(_array(trace.get("z")))
        if not z:
            return None
        rows = _rows(trace.get("z"))
        return words.grid.format(name=name, rows=rows, cols=len(z) // max(1, rows), lo=number(min(z)),
                                 hi=number(max(z)))
    if trace.get("hoverinfo") == "skip" and kind == "scatter" and "lines" not in str(trace.get("mode", "")):
        return None  # outlines and id labels drawn over another trace's cells
    xs, ys = _array(trace.get("x")), _array(trace.get("y"))
    texts = [plain(t) for t in _array(trace.get("text"))]
    if kind == "histogram":
        values = _numbers(xs)
        if not values:
            return None
        return words.series.format(name=name, n=len(values), x=x_title, x0=number(min(values)),
                                   x1=number(max(values)), y=x_title, lo=number(min(values)),
                                   hi=number(max(values)), last=number(values[-1]))
    if kind == "bar" or (texts and any(texts) and "lines" not in str(trace.get("mode", ""))):
        if kind == "bar":
            horizontal = trace.get("orientation") == "h"
            keys, vals = (ys, xs) if horizontal else (xs, ys)
            items = [f"{plain(number(k))} {number(v)}" for k, v in zip(keys, vals)]
        else:
            items = [t for t in texts if t]
        return words.values.format(name=name, items=_listed(items, words)) if items else None
    values = _numbers(ys)
    if not values:
        return None
    x_numbers = _numbers(xs)
    x0, x1 = (number(min(x_numbers)), number(max(x_numbers))) if x_numbers else ("1", number(len(values)))
    return words.series.format(name=name, n=len(values), x=x_title, x0=x0, x1=x1, y=y_title,
                               lo=number(min(values)), hi=number(max(values)), last=number(values[-1]))


def figure_alt(spec: Mapping, words: AltWords = AltWords()) -> str:
    """The text alternative of a plotly figure, from its dicts ({"data": [...], "layout": {...}}, as
    ui.fit.figure_spec gives them): the pool record's sentence when the builder left one in layout.meta["alt"],
    else one clause per trace drawn (a line: its points, range and last value; bars: each bar; a heatmap: its size
    and range; labelled markers: their labels) and the annotations' texts. Raises: KeyError for a spec without
    "data"."""
    layout = spec.get("layout") or {}
    meta = layout.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("alt"), dict) and meta["alt"].get("kind") == "pool":
        return pool_sentence(meta["alt"], words)
    parts = [s for s in (_trace_sentence(t, layout, words) for t in spec["data"]) if s]
    notes = [plain(a.get("text", "")) for a in layout.get("annotations") or []]
    notes = [n for n in notes if n]
    if notes:
        parts.append(_listed(notes, words))
    return words.sep.join(parts) if parts else words.empty


_ALT_ATTR = re.compile(r"""data-alt='([^']*)'""")
_ROW = re.compile(r'<div class="pg-row"[^>]*><div class="pg-name">([^<]*)</div><div class="pg-list"[^>]*>(.*?)'
                  r'</div></div>')
_CELL_TEXT = re.compile(r'<span class="pg-cell[^"]*"[^>]*>([^<]*)</span>')
_TITLE = re.compile(r'\stitle="([^"]*)"')
_STYLE = re.compile(r"<style.*?</style>", re.S)


def alt_attr(record: Mapping) -> str:
    """` data-alt='…'`: a record (e.g. pool_record) for an HTML diagram's root element, read by markup_alt."""
    return f" data-alt='{html.escape(json.dumps(record, separators=(',', ':')), quote=True)}'"


def markup_alt(markup: str, words: AltWords = AltWords()) -> str:
    """The text alternative of an HTML diagram (viz.cells, viz.pool.pool_html, …): the record of its data-alt
    attribute when it has one (the pool's sentence); else each row of cells as "name: their labels" (the
    scheduler's lanes, slot_mapping); else the cells' tooltips, which say what each mark is; else its visible
    text. Raises: json.JSONDecodeError for a data-alt that is not JSON."""
    found = _ALT_ATTR.search(markup)
    if found:
        record = json.loads(html.unescape(found.group(1)))
        if record.get("kind") == "pool":
            return pool_sentence(record, words)
    rows = [(html.unescape(name), [html.unescape(c) for c in _CELL_TEXT.findall(cells)])
            for name, cells in _ROW.findall(markup)]
    if rows:
        return words.sep.join(words.values.format(name=name, items=_listed(cells, words) if cells else "—")
                              for name, cells in rows)
    titles = [t for t in dict.fromkeys(plain(t) for t in _TITLE.findall(markup)) if t]
    if titles:
        return words.sep.join(titles[:MAX_ITEMS] + ([words.more.format(n=len(titles) - MAX_ITEMS)]
                                                    if len(titles) > MAX_ITEMS else []))
    return plain(_STYLE.sub(" ", markup)) or words.empty
