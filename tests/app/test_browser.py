"""The app in a real browser: one `streamlit run app.py` server and one headless Chromium for the module
(ui.bench.chromium). With PAGED_SCREENSHOTS=1, screenshots go to artifacts/screenshots/ (off by default: they
cost about 40 s of the suite and nothing asserts on them).

- every page in both languages, reached through the sidebar at its URL path, renders, and its first step works
- a lesson from the teacher's guide at a projector's 1024x768 and 1280x720 in presenter mode, in both languages,
  without touching the sidebar: no truncated button label, no clipped figure title, no table to scroll sideways,
  no figure wider than its column, body text >= 20 px and figure text >= 16 px; the step shortcut works
- a table wider than its column fades out at the edge(s) where more of it lies; one that fits does not
- a projector is the main screen: at 1024x768 in presenter mode each page's key figure fits one screen, metric values
  grow, page 4's source is folded, page 2's heatmaps name every head, the zh key badge says 空格
- ten quick clicks on a step button are ten steps; the keyboard steps, goes back, plays and pauses, also just after
  the mouse set a toggle (presenter mode) or the speed; an Add refused while playing stays on screen, and Adds
  pressed while playing are each applied once, and so are Exports (each one download)

Skips when chromium or playwright is missing, unless PAGED_REQUIRE_BROWSER=1 (CI), which turns the skip into a
failure.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from ui.bench.chromium import app_server, key_selector, wait_idle
from ui.nav import PAGES, guide_links
from ui.strings import t

from .app_util import ROOT

pytestmark = pytest.mark.browser

SHOTS = ROOT / "artifacts" / "screenshots"


def _shot(target, name: str) -> None:
    """A screenshot of a page or locator into SHOTS, when PAGED_SCREENSHOTS=1 (for a person to look at)."""
    if os.environ.get("PAGED_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(SHOTS / name))


MAIN_BUTTON = ('[data-testid="stMain"] [data-testid^="stBaseButton"]:not([disabled])'
               ':not([data-testid*="Download"])')
PROJECTORS = ({"width": 1024, "height": 768}, {"width": 1280, "height": 720})


@pytest.fixture(scope="module")
def server():
    """`streamlit run app.py` on a free port (log in artifacts/ when that folder exists)."""
    log = ROOT / "artifacts" / "streamlit_test_server.log" if (ROOT / "artifacts").exists() else None
    try:
        with app_server(log_path=log) as srv:
            yield srv.base
    except RuntimeError as err:
        pytest.fail(str(err))


def _check(page, what: str) -> None:
    wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception box on {what}"


def _unfold(page, label: str) -> None:
    """Open the main area's expander named `label` (page 4 folds its reference: issue 38)."""
    summaries = page.locator('[data-testid="stMain"] [data-testid="stExpander"] summary')
    summaries.filter(has_text=label).first.click()
    page.wait_for_timeout(300)


def _step_count(page, prefix: str) -> int:
    """The step the page's URL holds (step=, steps= or the length of ops=)."""
    query = parse_qs(urlsplit(page.url).query)
    if prefix == "batch":
        return len([op for op in query.get("ops", [""])[0].split(",") if op])
    return int((query.get("steps") or query.get("step") or ["-1"])[0])


def _wait_for_steps(page, prefix: str, want, timeout_s: float = 30) -> int:
    """Poll the URL until `want(step)` holds; returns the step (AssertionError after timeout_s)."""
    for _ in range(int(timeout_s * 10)):
        step = _step_count(page, prefix)
        if want(step):
            return step
        page.wait_for_timeout(100)
    raise AssertionError(f"{prefix}: the URL's step stayed at {_step_count(page, prefix)}")


# --- every page ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_renders_and_steps(server, browser, lang):
    """Open the app with ?lang=, then visit each page through its sidebar link (at the URL path it always had): no
    exception box, before and after clicking the page's first step button; with the sidebar open, at 1024x768 and
    1280x720, no truncated button label, clipped figure title or table that scrolls sideways."""
    # a tall viewport: the app scrolls inside its own container, so full_page would show only the top
    context = browser.new_context(viewport={"width": 1400, "height": 2200}, locale="en-US")
    page = context.new_page()
    problems = []
    try:
        page.goto(f"{server}/?lang={lang}", wait_until="domcontentloaded")
        for nav_page in PAGES:
            name = nav_page.url_path
            if name:  # the home page is already open; others through the sidebar, as a learner would
                page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').click()
                page.wait_for_url(f"**/{name}**")
            _check(page, f"{name or 'home'} ({lang})")
            for size in PROJECTORS:
                page.set_viewport_size(size)
                page.wait_for_timeout(250)
                problems += [f"{name or 'home'} {size['width']} {lang}: {p}"
                             for p in page.evaluate(LAYOUT_PROBLEMS, True)]  # sidebar open: may scroll inside
            page.set_viewport_size({"width": 1400, "height": 2200})
            _shot(page, f"{name or 'home'}_{lang}.png")
            buttons = page.locator(MAIN_BUTTON + " >> visible=true")  # a folded expander hides its buttons
            if buttons.count():
                buttons.first.click()
                page.wait_for_timeout(200)
                _check(page, f"{name or 'home'} after a click ({lang})")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


# --- a lesson at a projector's resolution --------------------------------------------------------------------------
LAYOUT_PROBLEMS = """(tablesMayScroll) => {
    // what a learner sees: not inside a closed expander (its content is laid out, folded away)
    const out = [], visible = (el) => el.getBoundingClientRect().width > 0
        && !el.closest('details:not([open])');
    const main = document.querySelector('[data-testid="stMain"]');
    main.querySelectorAll('button').forEach(b => {
        if (!visible(b)) return;
        b.querySelectorAll('p, span, div').forEach(e => {
            if (visible(e) && e.scrollWidth > e.clientWidth + 1)
                out.push('truncated button: ' + JSON.stringify(b.innerText.trim()));
        });
    });
    main.querySelectorAll('[data-testid="stTable"], [data-testid="stTable"] *, .dvn-scroller, '
                          + '[data-testid="stMarkdownContainer"] table').forEach(t => {
        const overflow = getComputedStyle(t).overflowX;
        if (!visible(t) || overflow === 'visible' || t.scrollWidth <= t.clientWidth + 1) return;
        if (!['auto', 'scroll'].includes(overflow)) out.push('table clipped: ' + t.scrollWidth + ' > ' + t.clientWidth);
        else if (!tablesMayScroll) out.push('table scrolls sideways: ' + t.scrollWidth + ' > ' + t.clientWidth);
    });
    const right = main.getBoundingClientRect().right;
    main.querySelectorAll('[data-testid="stMarkdownContainer"] table').forEach(t => {  // no scroller of its own
        if (visible(t) && getComputedStyle(t).overflowX === 'visible' && t.getBoundingClientRect().right > right + 1)
            out.push('markdown table cut at the page edge: ' + JSON.stringify(t.innerText.slice(0, 30)));
    });
    main.querySelectorAll('[data-testid="stTable"] :is(td, th), [data-testid="stMetricLabel"], '
                          + '[class*="st-key-buglab-card_"] p, [data-testid="stWidgetLabel"] p').forEach(cell => {
        // a word or number split across lines
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node; (node = walker.nextNode());) {
            for (const m of node.data.matchAll(/[^\\s\\u3000-\\u9fff\\uff00-\\uffef]+/g)) {  // CJK may break anywhere
                const range = document.createRange();
                range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
                const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0)
                                      .map(r => Math.round(r.top)));
                if (lines.size > 1) out.push('word broken in a table or label: ' + JSON.stringify(m[0]));
            }
        }
    });
    main.querySelectorAll('[data-testid="stHorizontalBlock"]').forEach(row => {  // metrics side by side
        const tops = {};
        row.querySelectorAll(':scope > [data-testid="stColumn"]').forEach(col => {
            const v = col.querySelector('[data-testid="stMetricValue"]');
            if (!v || !visible(v)) return;
            const line = Math.round(col.getBoundingClientRect().bottom);  // columns of one flex line end together
            (tops[line] = tops[line] || []).push(Math.round(v.getBoundingClientRect().top));
        });
        Object.values(tops).forEach(t => {
            if (Math.max(...t) - Math.min(...t) > 2) out.push('metric values of one row not level: ' + t.join(', '));
        });
    });
    main.querySelectorAll('[data-testid="stPlotlyChart"]').forEach(c => {
        const svg = c.querySelector('.main-svg');
        if (!svg || !visible(c)) return;
        const box = c.getBoundingClientRect(), s = svg.getBoundingClientRect();
        if (s.width > box.width + 1) out.push('figure wider than its column: ' + s.width + ' > ' + box.width);
        const title = c.querySelector('.gtitle');
        if (title) {
            const r = title.getBoundingClientRect();
            if (r.right > s.right + 1 || r.left < s.left - 1 || r.top < s.top - 1)
                out.push('clipped title: ' + JSON.stringify(title.textContent.slice(0, 50)));
        }
    });
    return out;
}"""

SMALL_TEXT = """([bodyPx, figurePx]) => {
    const out = [], px = (el) => parseFloat(getComputedStyle(el).fontSize);
    const main = document.querySelector('[data-testid="stMain"]');
    main.querySelectorAll('[data-testid="stMarkdownContainer"] p, [data-testid="stCaptionContainer"] p, button p')
        .forEach(p => { if (p.innerText.trim() && p.getBoundingClientRect().width > 0 && px(p) < bodyPx - 0.5)
            out.push('body text ' + px(p) + 'px: ' + JSON.stringify(p.innerText.slice(0, 40))); });
    main.querySelectorAll('[data-testid="stPlotlyChart"] svg text').forEach(t => {
        if (t.textContent.trim() && t.getBoundingClientRect().width > 0 && px(t) < figurePx - 0.5)
            out.push('figure text ' + px(t) + 'px: ' + JSON.stringify(t.textContent.slice(0, 40)));
    });
    return out.slice(0, 12);
}"""


def lesson_links(lang: str) -> list[str]:
    """The first link of each page in the guide, in the lesson's order (one stop per page)."""
    seen, out = set(), []
    for link in guide_links((ROOT / "docs" / f"teaching{'.zh' if lang == 'zh' else ''}.md").read_text("utf-8")):
        path = urlsplit(link).path
        if path not in seen:
            seen.add(path)
            out.append(link)
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_lesson_at_projector_sizes_in_presenter_mode(server, browser, lang):
    """Each page of the lesson, opened from the guide's link with presenter mode on, at 1024x768 and 1280x720:
    sidebar collapsed, no layout problem, large text; → takes one step on the stepping pages."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    problems = []
    try:
        for link in lesson_links(lang):
            page.set_viewport_size(PROJECTORS[0])
            page.goto(f"{server}{link}&present=1", wait_until="domcontentloaded")
            _check(page, link)
            name = urlsplit(link).path.strip("/") or "home"
            assert page.locator('[data-testid="stSidebar"][aria-expanded="true"]').count() == 0, "sidebar open"
            for size in PROJECTORS:
                page.set_viewport_size(size)
                page.wait_for_timeout(300)
                found = page.evaluate(LAYOUT_PROBLEMS, False) + page.evaluate(SMALL_TEXT, [20, 16])
                problems += [f"{name} {size['width']}x{size['height']} {lang}: {p}" for p in found]
                _shot(page, f"lesson_{name}_{size['width']}_{lang}.png")
            prefix = next(p.name for p in PAGES if p.url_path == urlsplit(link).path.strip("/"))
            step = page.locator(f'.st-key-{prefix}-bar [data-testid="stBaseButton-primary"] >> visible=true')
            if step.count() and step.first.is_enabled():  # a stepping page: the shortcut takes one step
                page.wait_for_function("() => window.__pagedLedger && window.__pagedLedger.send", timeout=20000)
                before = _step_count(page, prefix)
                page.keyboard.press("ArrowRight")
                _wait_for_steps(page, prefix, lambda s: s == before + 1)
                _check(page, f"{link} after →")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tables_keep_words_whole_at_1024_with_the_sidebar_open(server, browser, lang):
    """Engine after three steps at 1024x768, sidebar open (a main area of ~560 px): no word or number of a table is
    split across lines, and the per-sequence table, wider than its column, scrolls inside itself (nothing cut); page
    7's table of layouts scrolls inside itself too, instead of being cut at the page's edge; page 1's five metrics
    wrap onto two lines rather than break physical_block_id mid-word; the bug lab's "caught by" card wraps a test's
    name between its parts; no widget label (page 6's add form: four numbers in a row) is broken inside a word; the
    values of a row of metrics stay level when one label takes two lines (page 4 in presenter mode, page 6)."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    try:
        for path in ("Correct_to_fast", "Address_translation",  # a table of layouts; five metrics in a row
                     "Bug_lab?fault=early_increment"):  # a card naming a long test: it wraps at / :: _ only
            page.goto(f"{server}/{path}{'&' if '?' in path else '?'}lang={lang}", wait_until="domcontentloaded")
            _check(page, path)
            assert page.evaluate(LAYOUT_PROBLEMS, True) == [], path
        assert page.locator(".st-key-buglab-card_caught_by p").count() == 1  # the card was looked at
        _shot(page, f"buglab_card_1024_{lang}.png")
        page.goto(f"{server}/Sharing?lang={lang}", wait_until="domcontentloaded")  # the add form: four numbers in a row
        _check(page, "Sharing")
        page.locator('[data-testid="stExpander"] summary').first.click()
        page.locator(".st-key-sharing-new_seed").scroll_into_view_if_needed()
        _shot(page, f"sharing_form_1024_{lang}.png")
        assert page.evaluate(LAYOUT_PROBLEMS, True) == [], "Sharing's add form"
        page.goto(f"{server}/Engine?lang={lang}&steps=3&present=1", wait_until="domcontentloaded")  # sidebar shut
        _check(page, "Engine in presenter mode")
        assert page.evaluate(LAYOUT_PROBLEMS, False) == [], "Engine in presenter mode"  # the four metrics level
        page.goto(f"{server}/Engine?lang={lang}&steps=3&present=0", wait_until="domcontentloaded")
        _check(page, "Engine")
        _unfold(page, t("engine.reference_fold", lang))
        page.locator(".st-key-engine-text").scroll_into_view_if_needed()
        _shot(page, f"engine_state_table_1024_{lang}.png")
        assert page.evaluate(LAYOUT_PROBLEMS, True) == []
        wrapper = page.evaluate("""() => { const t = document.querySelector('.st-key-engine-text [data-testid="stTable"]');
            const w = t.firstElementChild; return [getComputedStyle(w).overflowX, w.scrollWidth, w.clientWidth,
            t.querySelector('table').getBoundingClientRect().width]; }""")
        overflow, scroll_w, client_w, table_w = wrapper
        assert overflow == "auto" and scroll_w > client_w and scroll_w >= table_w - 1, wrapper
    finally:
        context.close()


FADES = """(sel) => { const w = document.querySelector(sel); const cs = getComputedStyle(w);
    const px = (name) => parseFloat(cs.getPropertyValue(name));
    return {start: px('--paged-fade-start'), end: px('--paged-fade-end'), overflows: w.scrollWidth > w.clientWidth + 1}; }"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_table_that_scrolls_sideways_fades_at_its_clipped_edges(server, browser, lang):
    """Scrollbars hidden until used (macOS) show nothing of a table wider than its column: page 4's per-sequence table
    at 1024x768 (sidebar open) fades out at the right edge while more lies there, at both edges midway, at the left
    edge once scrolled to the end; page 3's table of checks, which fits, has no fade."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    scroller = '.st-key-engine-text [data-testid="stTable"] > div'
    try:
        page.goto(f"{server}/Engine?lang={lang}&steps=3", wait_until="domcontentloaded")
        _check(page, "Engine")
        _unfold(page, t("engine.reference_fold", lang))
        page.locator(".st-key-engine-text").scroll_into_view_if_needed()
        seen = []
        for where in ("0", "(w.scrollWidth - w.clientWidth) / 2", "w.scrollWidth"):
            page.evaluate(f"() => {{ const w = document.querySelector('{scroller}'); w.scrollLeft = {where}; }}")
            page.wait_for_timeout(200)
            seen.append(page.evaluate(FADES, scroller))
            _shot(page.locator(".st-key-engine-text"), f"engine_table_fade_{len(seen)}_{lang}.png")
        start, middle, end = seen
        assert all(f["overflows"] for f in seen), seen
        assert start["start"] == 0 and start["end"] > 20, seen
        assert middle["start"] > 20 and middle["end"] > 20, seen
        assert end["start"] > 20 and end["end"] == 0, seen
        page.goto(f"{server}/Batch_decode?lang={lang}&ops=d", wait_until="domcontentloaded")
        _check(page, "Batch_decode")
        fits = page.evaluate(FADES, '.st-key-batch-checks [data-testid="stTable"] > div')
        assert not fits["overflows"] and fits["start"] == 0 and fits["end"] == 0, fits
    finally:
        context.close()


# --- no lost clicks, and the keyboard --------------------------------------------------------------------------------
@pytest.mark.parametrize("path, key, prefix", [
    ("Batch_decode?lang=en&num_blocks=64", "batch.decode", "batch"),
    ("Engine?lang=en", "engine.step", "engine")])
def test_ten_quick_clicks_are_ten_steps(server, browser, path, key, prefix):
    """Clicks come as fast as playwright can send them, each while the previous one's rerun is still running."""
    context = browser.new_context(viewport=PROJECTORS[1], locale="en-US")
    page = context.new_page()
    try:
        page.goto(f"{server}/{path}", wait_until="domcontentloaded")
        _check(page, path)
        page.wait_for_function("() => window.__pagedLedger && window.__pagedLedger.send", timeout=20000)
        button = page.locator(key_selector(key) + " >> visible=true")
        for _ in range(10):
            button.click(timeout=30000)
        _wait_for_steps(page, prefix, lambda s: s >= 10, timeout_s=60)
        _check(page, f"{path} after 10 clicks")
        page.wait_for_timeout(500)
        assert _step_count(page, prefix) == 10
    finally:
        context.close()


def _open_gather_player(page, server: str, extra: str = "") -> None:
    """Page 2 with a 64-token context (query `extra` appended), checked, its playback bar ready for keys."""
    page.goto(f"{server}/Gather_and_attend?lang=en&context_len=64{extra}", wait_until="domcontentloaded")
    _check(page, "gather")
    page.wait_for_function("() => window.__pagedLedger && window.__pagedLedger.send", timeout=20000)


def test_keyboard_steps_back_plays_and_pauses(server, browser):
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    try:
        _open_gather_player(page, server, "&speed=4")
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowLeft")
        _wait_for_steps(page, "gather", lambda s: s == 2)
        _check(page, "gather after → → → ←")
        page.keyboard.press(" ")
        page.wait_for_function("() => location.search.includes('play=1')", timeout=20000)
        _wait_for_steps(page, "gather", lambda s: s >= 6)
        page.keyboard.press(" ")
        page.wait_for_function("() => location.search.includes('play=0')", timeout=20000)
        _check(page, "gather paused")
        paused_at = _step_count(page, "gather")
        page.wait_for_timeout(1200)
        assert _step_count(page, "gather") == paused_at, "no step after pausing"
        assert re.search(r"Step \d+ / 64", page.locator('[data-testid="stMain"]').inner_text())
    finally:
        context.close()


def test_keys_after_a_mouse_click_on_a_toggle_or_radio_still_drive_the_player(server, browser):
    """A teacher turns presenter mode on and picks 4 steps/s with the mouse, then presses → to step and space to play:
    the keys go to the player, not to the toggle (which would turn presenter mode off again) or the speed menu."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    try:
        _open_gather_player(page, server)
        page.locator('[data-testid="stSidebar"] [data-testid="stCheckbox"]').filter(
            has_text=re.compile("Presenter")).first.click()
        page.wait_for_function("() => location.search.includes('present=1')", timeout=20000)
        _check(page, "gather in presenter mode")
        page.keyboard.press("ArrowRight")
        _wait_for_steps(page, "gather", lambda s: s == 1)
        page.locator('.st-key-gather-bar [data-testid="stSelectbox"] >> visible=true').first.click()
        page.locator('[role="option"]').filter(has_text="4").first.click()  # 4 steps/s, with the mouse
        page.wait_for_function("() => location.search.includes('speed=4')", timeout=20000)
        _check(page, "gather at 4 steps/s")
        page.keyboard.press(" ")
        page.wait_for_function("() => location.search.includes('play=1')", timeout=20000)
        page.keyboard.press(" ")
        page.wait_for_function("() => location.search.includes('play=0')", timeout=20000)
        _check(page, "gather paused")
        assert "present=1" in page.url, "space or an arrow flipped the presenter toggle"
        assert page.locator('[role="listbox"]').count() == 0, "space opened the speed menu"
    finally:
        context.close()


def test_an_add_refused_while_playing_stays_on_screen(server, browser):
    """Page 4 plays at 4 steps/s; a student presses Add with an empty prompt: the refusal stays under the form while
    the steps go on (each step reruns only the step fragment), instead of vanishing with the next step."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    try:
        page.goto(f"{server}/Engine?lang=en&speed=4&play=1", wait_until="domcontentloaded")
        _check(page, "engine playing")
        _wait_for_steps(page, "engine", lambda s: s >= 1)  # playing: the page's first full runs are over
        page.get_by_text("Add a request").first.click()
        prompt = page.locator(".st-key-engine-new_text input")
        prompt.fill("")
        prompt.press("Tab")
        page.wait_for_function("el => el.value === ''", arg=prompt.element_handle(), timeout=20000)
        page.locator(key_selector("engine.add") + " >> visible=true").click()
        page.get_by_text("The prompt is empty").first.wait_for(timeout=20000)
        at_add = _step_count(page, "engine")
        _wait_for_steps(page, "engine", lambda s: s >= at_add + 4)
        assert "play=1" in page.url
        assert page.get_by_text("The prompt is empty").count() == 1, "the refusal vanished with a step"
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()


def _request_count(page) -> int:
    """Requests the engine page's URL holds (its reqs= list)."""
    return len(json.loads(parse_qs(urlsplit(page.url).query).get("reqs", ["[]"])[0]))


def test_adds_pressed_while_playing_are_each_applied_once(server, browser):
    """Page 4 plays at 4 steps/s; a student presses Add three times in quick succession: three requests join, none
    lost to a step's rerun and none doubled (the ledger logs Add like a step), the page goes on playing, and the
    last Add's outcome shows under the form."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    try:
        page.goto(f"{server}/Engine?lang=en&speed=4&play=1", wait_until="domcontentloaded")
        _check(page, "engine playing")
        _wait_for_steps(page, "engine", lambda s: s >= 1)
        page.get_by_text("Add a request").first.click()
        before = _request_count(page)
        add = page.locator(key_selector("engine.add") + " >> visible=true")
        for _ in range(3):
            add.click()
        for _ in range(300):
            if _request_count(page) >= before + 3:
                break
            page.wait_for_timeout(100)
        page.wait_for_timeout(1500)  # a doubled Add would show by now
        _check(page, "engine after three Adds")
        assert _request_count(page) == before + 3
        logged = page.evaluate("() => window.__pagedLedger.log.filter((e) => e[1] === 'engine.add').length")
        assert logged == 3, "the Adds did not go through the ledger"
        assert "play=1" in page.url, "an Add paused the player"
        assert page.get_by_text("joined the waiting queue").count() == 1
    finally:
        context.close()


@pytest.mark.slow
@pytest.mark.parametrize("path, prefix", [
    ("Engine", "engine"),
    ("Swap_or_recompute", "swap")])  # issue 35 item 3: a whole-page tick had stopped the press being made
def test_exports_pressed_while_playing_each_download_once(server, browser, path, prefix):
    """Pages 4 and 10 play at 4 steps/s; Export is pressed four times, each press followed at once by a play tick
    (the collision that lost 7 of 15 exports): four downloads arrive, none lost and none doubled, each valid JSON,
    and the presses went through the ledger."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US", accept_downloads=True)
    page = context.new_page()
    downloads: list = []
    page.on("download", lambda download: downloads.append(download))
    presses = 4
    try:
        page.goto(f"{server}/{path}?lang=en&speed=4&play=1", wait_until="domcontentloaded")
        export = page.locator(key_selector(f"{prefix}.export") + " >> visible=true")
        export.wait_for(timeout=60000)  # (playing: the app is never idle for long, so no wait_idle here)
        _wait_for_steps(page, prefix, lambda s: s >= 1)
        for _ in range(presses):
            export.click()
            page.evaluate("() => { if (window.__pagedLedger) window.__pagedLedger.lastTick = -1e9; }")  # tick now
            page.wait_for_timeout(300)
        for _ in range(300):
            if len(downloads) >= presses:
                break
            page.wait_for_timeout(100)
        page.wait_for_timeout(1500)  # a doubled download would arrive by now
        assert page.locator('[data-testid="stException"]').count() == 0  # (still playing: never idle for long)
        assert len(downloads) == presses, f"{len(downloads)} downloads for {presses} Export presses"
        for download in downloads:
            assert download.suggested_filename == f"{prefix}_trace.json"
            assert isinstance(json.loads(open(download.path(), encoding="utf-8").read()), dict)
        logged = page.evaluate(f"() => window.__pagedLedger.log.filter((e) => e[1] === '{prefix}.export').length")
        assert logged == presses, "the exports did not go through the ledger"
    finally:
        context.close()


# --- a projector is the main screen (issue 27): 1024x768, presenter mode -------------------------------------------
SCREEN = {"width": 1024, "height": 768}
# each page's key figure (its container's key): what a teacher points at must fit one screen
KEY_FIGURES = {
    "Address_translation": [".st-key-address-chain", ".st-key-address-pool"],
    "Gather_and_attend?step=10": [".st-key-gather-pool"],
    "Batch_decode?ops=d,d": [".st-key-batch-pool"],
    "Engine?steps=3": [".st-key-engine-queues", ".st-key-engine-pool"],  # the live chain is folded (issue 38)
    "Bug_lab": [".st-key-buglab-pool"],
    "Sharing?steps=3": [".st-key-sharing-pool"],
}
HEIGHT = "(sel) => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().height : -1; }"
FONTS = """() => { const px = (e) => parseFloat(getComputedStyle(e).fontSize);
    const main = document.querySelector('[data-testid="stMain"]');
    return [...main.querySelectorAll('[data-testid="stMetricValue"] p')].map(px); }"""
BOXES = """(sel) => [...document.querySelectorAll(sel)].filter(t => t.textContent.trim()).map(t => {
    const r = t.getBoundingClientRect(); return [r.top, r.bottom, t.textContent]; })"""


def _open_presenting(page, server, path: str, lang: str) -> None:
    page.goto(f"{server}/{path}{'&' if '?' in path else '?'}lang={lang}&present=1", wait_until="domcontentloaded")
    _check(page, path)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_key_figures_fit_one_screen_and_metrics_grow(server, browser, lang):
    """Every page's key figure is at most one 768 px screen tall at 1024 px in presenter mode (page 4's pool of 32
    blocks was 1020 px); a metric's value is larger than the 36 px it has outside presenter mode (the body-text rule
    made it 20 px); in 简体中文 the play button's "Space" key badge reads 空格."""
    context = browser.new_context(viewport=SCREEN, locale="en-US")
    page = context.new_page()
    try:
        too_tall = []
        for path, selectors in KEY_FIGURES.items():
            _open_presenting(page, server, path, lang)
            for sel in selectors:
                height = page.evaluate(HEIGHT, sel)
                assert height > 0, f"{path}: {sel} not drawn"
                if height > SCREEN["height"]:
                    too_tall.append(f"{path} {sel}: {height:.0f} px")
        assert not too_tall, too_tall
        _open_presenting(page, server, "Gather_and_attend?step=10", lang)
        sizes = page.evaluate(FONTS)
        assert len(sizes) == 4 and min(sizes) > 36, sizes
        badge = page.evaluate("""() => { const k = document.querySelector('kbd[aria-label="Shortcut Space"]');
            return [getComputedStyle(k, '::after').content, getComputedStyle(k).webkitTextFillColor]; }""")
        # the play button's key badge says the key's name in the page's language (Streamlit prints "Space")
        assert badge == (['"空格"', "rgba(0, 0, 0, 0)"] if lang == "zh" else ["none", badge[1]]), badge
    finally:
        context.close()


def test_engine_folds_its_source_and_gather_names_every_head(server, browser):
    """Page 4: no code listing is open (the scheduler's source sits in an expander); page 2's output heatmap names
    all four heads h0–h3 and its colour-bar tick labels do not overlap."""
    context = browser.new_context(viewport=SCREEN, locale="en-US")
    page = context.new_page()
    try:
        _open_presenting(page, server, "Engine?steps=3", "en")
        assert page.locator('[data-testid="stMain"] [data-testid="stCode"] >> visible=true').count() == 0
        _open_presenting(page, server, "Gather_and_attend?step=10", "en")
        heads = [b[2] for b in page.evaluate(BOXES, ".st-key-gather-output .ytick text")]
        assert heads == ["h0", "h1", "h2", "h3"], heads
        ticks = sorted(page.evaluate(BOXES, ".st-key-gather-output .colorbar .cbaxis text, "
                                            ".st-key-gather-output .colorbar text.ytick"))
        assert len(ticks) == 3 and all(a[1] <= b[0] + 0.5 for a, b in zip(ticks, ticks[1:])), ticks
    finally:
        context.close()


def test_guide_links_open_in_the_same_tab(server, browser):
    """On the guide page every app link is an anchor with target=_self, and following one loads its page in the same
    tab (the browser context still has one page)."""
    context = browser.new_context(viewport=PROJECTORS[0], locale="en-US")
    page = context.new_page()
    try:
        page.goto(f"{server}/Teaching_guide?lang=en", wait_until="domcontentloaded")
        _check(page, "the guide")
        anchors = page.eval_on_selector_all('[data-testid="stMain"] a[href^="/"]',
                                            "els => els.map(e => [e.getAttribute('href'), e.getAttribute('target')])")
        expected = guide_links((ROOT / "docs" / "teaching.md").read_text("utf-8"))
        assert [href for href, _ in anchors] == expected and {target for _, target in anchors} == {"_self"}
        page.click('[data-testid="stMain"] a[href^="/Batch_decode?lang=en&ops=w2"]')
        page.wait_for_url("**/Batch_decode?**")
        _check(page, "the page the link opened")
        assert len(context.pages) == 1 and "ops=w2" in page.url
    finally:
        context.close()
