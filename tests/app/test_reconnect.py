"""A tab that reconnects to a fresh server session (the server restarted under it) never replays the clicks its
ledger logged for the old session: after the restart, one click on Step is exactly one step from the state the URL
names. A real `streamlit run` server and Debian's chromium (ui.bench.chromium)."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, urlsplit

import pytest

from ui.bench.chromium import app_server, free_port, key_selector, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _ops(page) -> int:
    """Decode steps the batch page's URL holds (the length of its ops= list)."""
    return len([op for op in parse_qs(urlsplit(page.url).query).get("ops", [""])[0].split(",") if op])


def _wait_ops(page, want: int, timeout_s: float = 30) -> int:
    for _ in range(int(timeout_s * 10)):
        if _ops(page) >= want:
            break
        page.wait_for_timeout(100)
    return _ops(page)


def test_a_step_after_the_server_restarts_is_one_step(browser):
    """Three steps on Batch decode, the server restarted under the open tab, one Step: four steps in all (the URL's
    three restored, plus one), never the old log's three replayed on top."""
    port = int(os.environ.get("PAGED_TEST_PORT", free_port()))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    step = key_selector("batch.decode") + " >> visible=true"
    with app_server(port=port) as srv:
        page.goto(f"{srv.base}/Batch_decode?lang=en", wait_until="domcontentloaded")
        wait_idle(page)
        for n in range(1, 4):
            page.locator(step).click()
            assert _wait_ops(page, n) == n
        wait_idle(page)
    with app_server(port=port):  # a fresh server: the tab reconnects to a new session
        page.wait_for_timeout(3000)
        wait_idle(page, timeout_ms=60000)
        page.locator(step).click()
        _wait_ops(page, 4)
        page.wait_for_timeout(2500)  # a replay would show by now
        wait_idle(page)
        assert _ops(page) == 4, f"one Step after the restart took the page to step {_ops(page)}, not 4"
        assert page.locator('[data-testid="stException"]').count() == 0
