"""The engine's chain as a live diagram: seven module boxes top to bottom, joined by arrows, each arrow labelled
with the values this step handed on; a module that did nothing this step is dimmed, the selected one outlined.

    Scheduler → Block Manager → ModelRunner → PagedAttention → Sampler → Sequence update → free finished blocks
    (and from the last one back to the Scheduler: the next step)

Drawn as HTML (a few dozen elements), not a plotly figure: it changes every step, and a figure of boxes, arrows and
text labels costs the browser ~150 ms to redraw where this costs a few. Data in (names, which are active, one label
per arrow), markup out: the words come from the caller. CHAIN_CSS is its style sheet (ui.present injects it).
"""

from __future__ import annotations

import html
import re
from typing import Sequence

from .colors import OKABE_ITO

ACTIVE_FILL, IDLE_FILL = OKABE_ITO["sky_blue"], "#F2F2F2"
ACTIVE_INK, IDLE_INK = "#000000", "#9A9A9A"
BROKEN_INK = OKABE_ITO["vermillion"]  # a module broken on purpose (page 4's fault picker): dashed, and marked ×
CHAIN_CSS = f"""
.paged-chain {{ display: flex; flex-direction: column; margin: 0.2rem 0 0.6rem 0; }}
.paged-chain .pc-row {{ display: flex; align-items: center; gap: 0.9rem; }}
.paged-chain .pc-box {{ flex: 0 0 11rem; box-sizing: border-box; text-align: center; font-weight: 700;
    font-size: 0.85rem; padding: 0.4rem 0.3rem; border-radius: 4px; border: 1.2px dotted #BBBBBB;
    background: {IDLE_FILL}; color: {IDLE_INK}; }}
.paged-chain .pc-box.pc-on {{ background: {ACTIVE_FILL}; border: 1.2px solid #333333; color: {ACTIVE_INK}; }}
.paged-chain .pc-box.pc-sel {{ border: 3px solid #000000; }}
.paged-chain .pc-arrow {{ flex: 0 0 11rem; text-align: center; font-size: 1.2rem; line-height: 1.3;
    color: {IDLE_INK}; }}
.paged-chain .pc-out {{ font-family: monospace; font-size: 0.78rem; line-height: 1.35; color: {IDLE_INK};
    overflow-wrap: anywhere; min-width: 0; }}
.paged-chain .pc-on {{ color: {ACTIVE_INK}; }}
.paged-chain .pc-box.pc-broken {{ border: 3px dashed {BROKEN_INK}; background: #FBE3D6; color: {BROKEN_INK}; }}
"""
PRESENT_CHAIN_CSS = """
.paged-chain .pc-box { font-size: 20px; flex-basis: 15rem; }
.paged-chain .pc-arrow { font-size: 24px; flex-basis: 15rem; }
.paged-chain .pc-out { font-size: 16px; }
"""
_KEPT_TAGS = re.compile(r"&lt;(/?b|br)&gt;")


def label_html(text: str) -> str:
    """`text` escaped for HTML except the line breaks and bold of plotly-style labels (<br>, <b>, </b>)."""
    return _KEPT_TAGS.sub(r"<\1>", html.escape(text, quote=False))


def chain_live_html(names: Sequence[str], active: Sequence[bool], labels: Sequence[str],
                    selected: int | None = None, broken: int | None = None, broken_note: str = "") -> str:
    """names[i]: module i's name; active[i]: it did something this step; labels[i]: the values on the arrow leaving
    it (the last one loops back to the first, "↺"). `selected` outlines that box. Each box's tooltip (title) is
    "name: label". `broken` marks that box as broken on purpose (dashed, "× broken_note" under its name). One line
    of HTML (no blank line: Markdown would end the block there). ValueError when the three lengths differ."""
    n = len(names)
    if not (len(active) == len(labels) == n):
        raise ValueError(f"names, active and labels must have the same length, got {n}, {len(active)}, "
                         f"{len(labels)}")
    rows = []
    for i, (name, on, label) in enumerate(zip(names, active, labels)):
        state = " pc-on" if on else ""
        tip = html.escape(f"{name}: " + re.sub(r"<br>", " · ", label).replace("<b>", "").replace("</b>", ""))
        mark = f"<br>× {html.escape(broken_note)}" if i == broken else ""
        box = (f'<div class="pc-box{state}{" pc-sel" if i == selected else ""}{" pc-broken" if i == broken else ""}"'
               f' title="{tip}">{i + 1}. {html.escape(name)}{mark}</div>')
        if i + 1 < n:
            rows.append(f'<div class="pc-row">{box}</div>')
            rows.append(f'<div class="pc-row"><div class="pc-arrow{state}">↓</div>'
                        f'<div class="pc-out{state}">{label_html(label)}</div></div>')
        else:  # the last module's output goes back to the scheduler for the next step
            rows.append(f'<div class="pc-row">{box}<div class="pc-out{state}">↺ {label_html(label)}</div></div>')
    return '<div class="paged-chain">' + "".join(rows) + "</div>"


def chain_labels(markup: str) -> list[str]:
    """The arrow labels of chain_live_html's markup, as text ("<br>" kept, "↺ " dropped): what tests read back."""
    found = re.findall(r'<div class="pc-out[^"]*">(.*?)</div>', markup)
    return [html.unescape(x).removeprefix("↺ ") for x in found]
