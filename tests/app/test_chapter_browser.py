"""Pages 9-12 in a real browser (one server, one chromium for the module): page 10's rings stay clear of their
diagram's heading at 1024 wide in both languages, and in presenter mode each chapter page's Break-it switch sits
beside its label, not above it."""

from __future__ import annotations

import pytest

from ui.bench.chromium import wait_idle

pytestmark = pytest.mark.browser

# Every ringed cell (dashed circle, thick outline) against the heading above its diagram: the ring's top edge
# (outline offset + width beyond the cell) must lie below the heading's last line.
RINGS_UNDER_TITLES = """() => {
    const out = [];
    for (const cells of document.querySelectorAll('.paged-cells')) {
        const box = cells.closest('[class*="st-key-"]');
        const title = box && box.querySelector('.paged-figure-title');
        if (!title) continue;
        const bottom = title.getBoundingClientRect().bottom;
        for (const cell of cells.querySelectorAll('.pg-pre, .pg-sched')) {
            const s = getComputedStyle(cell);
            const ring = parseFloat(s.outlineOffset) + parseFloat(s.outlineWidth);
            const top = cell.getBoundingClientRect().top - ring;
            if (top < bottom - 0.5) out.push(`${cell.textContent} ring top ${top.toFixed(1)} < title ${bottom.toFixed(1)}`);
        }
    }
    return out;
}"""
# The main area's switches: the track's vertical centre against its label text's, in px.
SWITCH_OFFSETS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stCheckbox"] label')]
    .map(label => {
        const track = label.firstElementChild.getBoundingClientRect();
        const text = label.querySelector('[data-testid="stWidgetLabel"], p').getBoundingClientRect();
        return Math.abs((track.top + track.bottom) / 2 - (text.top + text.bottom) / 2);
    })"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_swap_rings_do_not_cover_their_heading(server, browser, lang):
    """At step 10 (a swap-out: rings in both pools) at 1024x768, no ring reaches into its diagram's heading."""
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    try:
        page.goto(f"{server}/Swap_or_recompute?lang={lang}&step=10", wait_until="domcontentloaded")
        wait_idle(page)
        assert page.locator(".paged-cells .pg-pre").count() > 0  # the probe has rings to look at
        assert page.evaluate(RINGS_UNDER_TITLES) == []
    finally:
        page.close()


def test_break_switches_sit_beside_their_labels_in_presenter_mode(server, browser):
    """Presenter mode enlarges a label to 20 px: each chapter page's Break-it switch stays centred on it (within
    4 px)."""
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    try:
        for path in ("Beam_search", "Sliding_window", "Speculative_decoding"):
            page.goto(f"{server}/{path}?lang=en&present=1", wait_until="domcontentloaded")
            wait_idle(page)
            offsets = page.evaluate(SWITCH_OFFSETS)
            assert offsets and max(offsets) <= 4, (path, offsets)
    finally:
        page.close()
