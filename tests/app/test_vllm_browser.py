"""Page 6 in a real browser with vLLM installed: after two steps the "real vLLM" column says "Identical" and shows
vLLM's block table next to ours. Skips without chromium / playwright or vLLM, unless CI requires them
(PAGED_REQUIRE_BROWSER=1, PAGED_REQUIRE_VLLM=1: then it fails)."""

from __future__ import annotations

import os

import pytest

from ui.browser import BrowserUnavailable, app_server, chromium, key_selector, wait_idle
from ui.strings import t

from vllm_util import need_vllm

pytestmark = pytest.mark.browser


def test_sharing_page_shows_vllm_identical_in_a_browser():
    """Two clicks on Step, then the page shows the vLLM header, the "Identical" verdict and both block tables."""
    need_vllm()
    try:
        browser_cm = chromium()
        browser = browser_cm.__enter__()
    except BrowserUnavailable as err:
        if os.environ.get("PAGED_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PAGED_REQUIRE_BROWSER=1 but {err}")
        pytest.skip(str(err))
    try:
        with app_server() as srv:
            page = browser.new_page(viewport={"width": 1400, "height": 2200})
            page.goto(f"{srv.base}/?lang=en", wait_until="domcontentloaded")
            wait_idle(page, timeout_ms=90000)
            page.locator('[data-testid="stSidebarNav"] a[href$="/Sharing"]').click()  # as a learner gets there
            page.wait_for_url("**/Sharing**")
            wait_idle(page, timeout_ms=90000)
            for _ in range(2):
                page.locator(key_selector("sharing.step") + " >> visible=true").first.click()
                wait_idle(page, timeout_ms=90000)
            main = page.locator('[data-testid="stMain"]')
            text = main.inner_text()
            assert page.locator('[data-testid="stException"]').count() == 0
            assert t("vllm.header", "en") in text
            assert "Identical" in text and t("vllm.col_theirs", "en") in text
    finally:
        browser_cm.__exit__(None, None, None)
