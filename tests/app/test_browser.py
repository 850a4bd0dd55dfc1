"""The app in a real browser: one `streamlit run` server and one headless Chromium for the module; every page in
both languages (reached through the sidebar, at the URL path Streamlit derives from its file name), one click on its
first step button, no exception box; screenshots in artifacts/screenshots/.

Pages are discovered from pages/, so pages added later are visited too. Skips when chromium or playwright is
missing, unless PAGED_REQUIRE_BROWSER=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import APP, ROOT, page_files

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "artifacts" / "screenshots"
MAIN_BUTTON = ('[data-testid="stMain"] [data-testid^="stBaseButton"]:not([disabled])'
               ':not([data-testid*="Download"])')


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("PAGED_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PAGED_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def url_path(page: Path) -> str:
    """The URL path Streamlit serves a page under: "" for the home script, else the page name derived from the
    file name (leading number and separators dropped, spaces as underscores, e.g. 1_Address_translation.py ->
    Address_translation)."""
    if page == APP:
        return ""
    from streamlit.source_util import page_icon_and_name
    return page_icon_and_name(page)[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """`streamlit run app.py` on a free port; yields its base URL; terminated at the end of the module."""
    port = _free_port()
    log = open(ROOT / "artifacts" / "streamlit_test_server.log", "w") if (ROOT / "artifacts").exists() else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", "--server.runOnSave", "false"],
        cwd=ROOT, stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read().decode() == "ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not become healthy (exit code {proc.poll()})")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log:
            log.close()


@pytest.fixture(scope="module")
def browser():
    """One headless Debian chromium driven by playwright (never `playwright install`)."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        _skip_or_fail(f"chromium is not installed at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("the playwright package is not installed")
    pw = sync_playwright().start()
    try:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    except Exception as err:  # noqa: BLE001 — any launch failure means "no usable browser here"
        pw.stop()
        _skip_or_fail(f"chromium did not start: {err}")
    yield chromium
    chromium.close()
    pw.stop()


IDLE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;  // script still running
    const running = document.querySelector('[data-testid="stStatusWidgetRunningIcon"]');
    const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'));
    const loading = document.querySelector('[data-testid="stSkeleton"]');
    return !running && !loading && document.querySelector('[data-testid="stMain"] h1') !== null
        && charts.every(c => c.querySelector('.main-svg') !== null);
}"""


def _wait_idle(page, timeout_ms: int = 30000) -> None:
    """Wait until the script run is over: the app's script state is notRunning, a title, no 'running' icon, no
    skeleton, every plotly chart drawn; looked at twice, 250 ms apart, since a rerun may start just after the
    first look."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_function(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(250)
    page.wait_for_function(IDLE, timeout=timeout_ms)


def _check(page, what: str) -> None:
    _wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception box on {what}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_renders_and_steps(server, browser, lang):
    """Open the app with ?lang=, then visit each page through its sidebar link (whose URL path must be the one
    derived from the file name): no exception box, before and after clicking the page's first step button."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    # a tall viewport: the app scrolls inside its own container, so full_page would show only the top
    context = browser.new_context(viewport={"width": 1400, "height": 2200}, locale="en-US")
    page = context.new_page()
    try:
        page.goto(f"{server}/?lang={lang}", wait_until="domcontentloaded")
        for path in page_files():
            name = url_path(path)
            if name:  # the home page is already open; others through the sidebar, as a learner would
                page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').click()
                page.wait_for_url(f"**/{name}**")
            _check(page, f"{path.name} ({lang})")
            page.screenshot(path=str(SHOTS / f"{path.stem}_{lang}.png"))
            buttons = page.locator(MAIN_BUTTON)
            if buttons.count():
                buttons.first.click()
                page.wait_for_timeout(200)
                _check(page, f"{path.name} after a click ({lang})")
                page.screenshot(path=str(SHOTS / f"{path.stem}_{lang}_step.png"))
    finally:
        context.close()
