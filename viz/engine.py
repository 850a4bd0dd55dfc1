"""Engine chart: cached_token_count over time against the state rule, as HTML (the twins' logits difference, the
scheduler's queues and one step's slot_mapping are HTML too: viz.cells). One colour and label per sequence, as in
the pool grid (colors.seq_color / seq_label)."""

from __future__ import annotations

import base64
import html
from typing import Mapping, Sequence

from .colors import seq_color, seq_label

RECENT_STEPS = 64  # the newest steps page 4's cache chart and state-rule table show (their cost stays flat)


def integer_dtick(last: int) -> int:
    """A whole-number tick step giving about 10 ticks up to `last`."""
    return max(1, -(-last // 10))


def nice_step(top: float, ticks: int = 6) -> int:
    """A whole-number tick step of 1, 2 or 5 × 10^k giving at most about `ticks` ticks from 0 to `top`."""
    step = 1
    for k in range(0, 12):
        for f in (1, 2, 5):
            step = f * 10 ** k
            if top / step <= ticks:
                return step
    return step


def cache_rule_html(series: Mapping[int, Mapping[str, Sequence[int]]], cached_name: str = "cached_token_count",
                   rule_name: str = "prompt_len + generated − 1", x_title: str = "step",
                   y_title: str = "tokens", width: int = 640, height: int = 280,
                   tip: str = "{seq} step {step}: {name} = {value}", first_step: int = 0) -> str:
    """cached_token_count against the state rule as HTML (a step redraws it in a few ms, a plotly chart in ~100):
    an SVG image (st.html strips inline <svg>) of, per sequence, its cached_token_count after each step (solid line,
    dots) and the state rule prompt_len + generated − 1 (dotted line), same colour; they coincide after every step
    that ran the sequence, a preempted one drops to 0 until its recompute. Over each dot a span whose tooltip
    (title) gives both values at that step, one `tip` line each ("A step 3: cached_token_count = 0", format fields
    {seq} {step} {name} {value}); a legend of the sequences below.
    series: seq_id -> {"step", "cached", "rule"}, three lists of one length. first_step: the x axis starts there
    (a page showing only its last steps passes the first of them; its cost then follows the steps shown).
    The title goes above it (ui.widgets.show_cells). ValueError when a sequence's step/cached/rule lengths differ."""
    for seq_id, d in series.items():
        if not len(d["step"]) == len(d["cached"]) == len(d["rule"]):
            raise ValueError(f"sequence {seq_id}: step, cached and rule must have one length")
    last = max(first_step + 5, max((max(d["step"], default=0) for d in series.values()), default=0))
    top = max([1] + [max(list(d["cached"]) + list(d["rule"]), default=0) for d in series.values()])
    ystep = nice_step(top)
    ymax = -(-top // ystep) * ystep
    left, right, up, down = 52, 12, 10, 40
    pw, ph = width - left - right, height - up - down
    span = last - first_step + 0.6
    sx = lambda x: left + pw * (x - first_step + 0.3) / span  # noqa: E731  (x range: first - 0.3 … last + 0.3)
    sy = lambda y: up + ph * (1 - y / ymax)  # noqa: E731
    esc, dots = html.escape, []
    parts = [f'<svg class="paged-svg" viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" '
             f'font-size="12" font-family="sans-serif" xmlns="http://www.w3.org/2000/svg">']
    for y in range(0, ymax + 1, ystep):
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#E5E5E5"/>'
                     f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end" fill="#444444">{y}</text>')
    dtick = integer_dtick(last - first_step)
    for x in range(-(-first_step // dtick) * dtick, last + 1, dtick):
        parts.append(f'<text x="{sx(x):.1f}" y="{up + ph + 16}" text-anchor="middle" fill="#444444">{x}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle" fill="#444444">'
                 f'{esc(x_title)}</text><text transform="translate(12 {up + ph / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle" fill="#444444">{esc(y_title)}</text>')
    for seq_id, d in series.items():
        label, color = seq_label(seq_id), seq_color(seq_id)
        rule = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(d["step"], d["rule"]))
        cached = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(d["step"], d["cached"]))
        parts.append(f'<g data-seq="{esc(label)}"><polyline class="rule" points="{rule}" fill="none" '
                     f'stroke="{color}" stroke-width="2" stroke-dasharray="2 3"/><polyline class="cached" '
                     f'points="{cached}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        for x, c, r in zip(d["step"], d["cached"], d["rule"]):
            lines = (tip.format(seq=label, step=x, name=cached_name, value=c),
                     tip.format(seq=label, step=x, name=rule_name, value=r))
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(c):.1f}" r="4" fill="{color}"/>')
            dots.append(f'<span class="pc-dot" style="left:{100 * sx(x) / width:.2f}%;top:{100 * sy(c) / height:.2f}%" '
                        f'title="{"&#10;".join(esc(line) for line in lines)}"></span>')
        parts.append("</g>")
    parts.append("</svg>")
    image = base64.b64encode("".join(parts).encode("utf-8")).decode("ascii")
    legend = "".join(f'<span class="pp-key"><span style="background:{seq_color(s)}"></span>'
                     f'{esc(seq_label(s))}</span>' for s in series)
    return (f'<div class="paged-pool"><div class="pc-plot" style="max-width:{width}px"><img alt="{esc(y_title)}" '
            f'src="data:image/svg+xml;base64,{image}">{"".join(dots)}</div><div class="pp-legend">{legend}</div></div>')
