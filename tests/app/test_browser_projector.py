"""A projector is the main screen (issue 27), in a real browser at 1024x768 in presenter mode (ui.browser, the
fixtures of test_browser.py): metric values grow with the text instead of shrinking to the body size; each page's key
figure fits one screen; page 4's module source is folded away; page 2's heatmaps name every head and their colour-bar
ticks do not overlap."""

from __future__ import annotations

import pytest

from .test_browser import _check, browser, server  # noqa: F401  (module fixtures: one server, one chromium)

pytestmark = pytest.mark.browser

SCREEN = {"width": 1024, "height": 768}
# each page's key figure (its container's key): what a teacher points at must fit one screen
KEY_FIGURES = {
    "Address_translation": [".st-key-address-chain", ".st-key-address-pool"],
    "Gather_and_attend?step=10": [".st-key-gather-pool"],
    "Batch_decode?ops=d,d": [".st-key-batch-pool"],
    "Engine?steps=3": [".st-key-engine-chain_live", ".st-key-engine-pool"],
    "Bug_lab": [".st-key-buglab-pool"],
    "Sharing?steps=3": [".st-key-sharing-pool"],
}
HEIGHT = "(sel) => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().height : -1; }"
FONTS = """() => { const px = (e) => parseFloat(getComputedStyle(e).fontSize);
    const main = document.querySelector('[data-testid="stMain"]');
    return [...main.querySelectorAll('[data-testid="stMetricValue"] p')].map(px); }"""
BOXES = """(sel) => [...document.querySelectorAll(sel)].filter(t => t.textContent.trim()).map(t => {
    const r = t.getBoundingClientRect(); return [r.top, r.bottom, t.textContent]; })"""


def _open(page, server, path: str, lang: str) -> None:  # noqa: F811
    page.goto(f"{server}/{path}{'&' if '?' in path else '?'}lang={lang}&present=1", wait_until="domcontentloaded")
    _check(page, path)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_key_figures_fit_one_screen_and_metrics_grow(server, browser, lang):  # noqa: F811
    """Every page's key figure is at most one 768 px screen tall at 1024 px in presenter mode (page 4's pool of 32
    blocks was 1020 px); a metric's value is larger than the 36 px it has outside presenter mode (the body-text rule
    made it 20 px); in 简体中文 the play button's "Space" key badge reads 空格."""
    context = browser.new_context(viewport=SCREEN, locale="en-US")
    page = context.new_page()
    try:
        too_tall = []
        for path, selectors in KEY_FIGURES.items():
            _open(page, server, path, lang)
            for sel in selectors:
                height = page.evaluate(HEIGHT, sel)
                assert height > 0, f"{path}: {sel} not drawn"
                if height > SCREEN["height"]:
                    too_tall.append(f"{path} {sel}: {height:.0f} px")
        assert not too_tall, too_tall
        _open(page, server, "Gather_and_attend?step=10", lang)
        sizes = page.evaluate(FONTS)
        assert len(sizes) == 4 and min(sizes) > 36, sizes
        badge = page.evaluate("""() => { const k = document.querySelector('kbd[aria-label="Shortcut Space"]');
            return [getComputedStyle(k, '::after').content, getComputedStyle(k).webkitTextFillColor]; }""")
        # the play button's key badge says the key's name in the page's language (Streamlit prints "Space")
        assert badge == (['"空格"', "rgba(0, 0, 0, 0)"] if lang == "zh" else ["none", badge[1]]), badge
    finally:
        context.close()


def test_engine_folds_its_source_and_gather_names_every_head(server, browser):  # noqa: F811
    """Page 4: no code listing is open (the scheduler's source sits in an expander); page 2's output heatmap names
    all four heads h0–h3 and its colour-bar tick labels do not overlap."""
    context = browser.new_context(viewport=SCREEN, locale="en-US")
    page = context.new_page()
    try:
        _open(page, server, "Engine?steps=3", "en")
        assert page.locator('[data-testid="stMain"] [data-testid="stCode"] >> visible=true').count() == 0
        _open(page, server, "Gather_and_attend?step=10", "en")
        heads = [b[2] for b in page.evaluate(BOXES, ".st-key-gather-output .ytick text")]
        assert heads == ["h0", "h1", "h2", "h3"], heads
        ticks = sorted(page.evaluate(BOXES, ".st-key-gather-output .colorbar .cbaxis text, "
                                            ".st-key-gather-output .colorbar text.ytick"))
        assert len(ticks) == 3 and all(a[1] <= b[0] + 0.5 for a, b in zip(ticks, ticks[1:])), ticks
    finally:
        context.close()
