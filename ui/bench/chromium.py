"""The app in a real browser, for the browser tests and `python -m ui.bench browser`: a `streamlit run app.py`
server on a free port, Debian's chromium driven by playwright (never `playwright install`), and the in-page probes
that say when a click's rerun is over.

    with app_server() as server:           # server.base = "http://127.0.0.1:<port>", server.pid
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1024, "height": 768})
            page.goto(server.base + "/Batch_decode?lang=en"); wait_idle(page)
            ms = timed_click(page, ".st-key-batch-step button")   # click -> script state notRunning

No streamlit import here: the server is a subprocess.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class BrowserUnavailable(RuntimeError):
    """Chromium or playwright is missing, or chromium would not start (the message says which)."""


@dataclass
class Server:
    base: str
    pid: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_server(port: int | None = None, log_path: Path | None = None, timeout_s: float = 60) -> Iterator[Server]:
    """`streamlit run app.py --server.headless true --server.port P --server.address 127.0.0.1`, healthy before it is
    yielded, terminated on exit. RuntimeError if it does not answer /_stcore/health within `timeout_s`."""
    port = port or free_port()
    log = open(log_path, "w") if log_path else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", "--server.runOnSave", "false"],
        cwd=ROOT, stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read().decode() == "ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not become healthy (exit code {proc.poll()})")
            time.sleep(0.3)
        yield Server(base, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if log:
            log.close()


@contextlib.contextmanager
def chromium():
    """One headless Debian chromium through playwright; BrowserUnavailable when it cannot be had."""
    if not Path(CHROMIUM).exists():
        raise BrowserUnavailable(f"chromium is not installed at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        raise BrowserUnavailable("the playwright package is not installed") from err
    pw = sync_playwright().start()
    try:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        except Exception as err:  # noqa: BLE001 — any launch failure means "no usable browser here"
            raise BrowserUnavailable(f"chromium did not start: {err}") from err
        try:
            yield browser
        finally:
            browser.close()
    finally:
        pw.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (from /proc/<pid>/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


IDLE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'));
    return !document.querySelector('[data-testid="stStatusWidgetRunningIcon"]')
        && !document.querySelector('[data-testid="stSkeleton"]')
        && document.querySelector('[data-testid="stMain"] h1') !== null
        && charts.every(c => c.querySelector('.main-svg') !== null);
}"""


def wait_idle(page, timeout_ms: int = 30000) -> None:
    """Wait until the script run is over (script state notRunning, a title, no running icon, no skeleton, every
    plotly chart drawn); looked at twice, 250 ms apart, since a rerun may start just after the first look."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_function(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(250)
    page.wait_for_function(IDLE, timeout=timeout_ms)


# Click `selector` from inside the page and resolve with the milliseconds until the rerun it caused is over: the app's
# script state back to notRunning after having left it, or (a run so quick the state never visibly changed) back to
# notRunning with the main area's text changed; then two animation frames, so what the run changed is painted.
TIMED_CLICK = """async ([selector, timeoutMs]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const main = () => (document.querySelector('[data-testid="stMain"]') || app).innerText;
    const state = () => app.getAttribute('data-test-script-state');
    const before = main();
    const t0 = performance.now();
    const done = new Promise((resolve, reject) => {
        let left = false;
        const obs = new MutationObserver((records) => {
            if (records.some(r => r.attributeName === 'data-test-script-state' && r.oldValue === 'notRunning')
                || state() !== 'notRunning') left = true;
            if (state() === 'notRunning' && (left || main() !== before)) { obs.disconnect(); resolve(); }
        });
        obs.observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state'],
                          childList: true, subtree: true, characterData: true});
        setTimeout(() => { obs.disconnect(); reject(new Error('no rerun finished in ' + timeoutMs + ' ms')); },
                   timeoutMs);
    });
    const target = Array.from(document.querySelectorAll(selector))
        .find(el => el.getBoundingClientRect().width > 0);  // horizontal rows keep a hidden copy of each widget
    target.click();
    await done;
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    return performance.now() - t0;
}"""


def timed_click(page, selector: str, timeout_ms: int = 30000) -> float:
    """Milliseconds from a click on `selector` to the app idle again (see TIMED_CLICK)."""
    return page.evaluate(TIMED_CLICK, [selector, timeout_ms])


def key_selector(key: str) -> str:
    """The CSS selector of the button of the widget with Streamlit key `key` (Streamlit's st-key-<key> class, every
    character outside [a-zA-Z0-9_-] written as '-'). A horizontal container also holds a hidden copy of each
    widget: with playwright, add `>> visible=true`."""
    import re
    return f".st-key-{re.sub(r'[^a-zA-Z0-9_-]', '-', key.strip())} button"
