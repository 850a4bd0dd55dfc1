"""An export downloads every time, whatever other sessions do: a learner presses Export on Batch decode while
another learner's session runs twice before the export reaches the browser (Streamlit's media cleanup after every
run deletes a generated file no session holds). A real `streamlit run` server, two tabs of Debian's chromium; tab
A's websocket passes through playwright, which holds any answer to a file request until B has run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from ui.bench.chromium import app_server, free_port, key_selector, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _relay(held: list):
    """A websocket route passing every message through, except a server's answer to a deferred-file request: that
    one waits in `held` as (route, message) until the test sends it on."""
    def handler(ws) -> None:
        server = ws.connect_to_server()
        ws.on_message(server.send)

        def from_server(message) -> None:
            if isinstance(message, bytes):
                msg = ForwardMsg()
                msg.ParseFromString(message)
                if msg.WhichOneof("type") == "backend_operation_response":
                    held.append((ws, message))
                    return
            ws.send(message)
        server.on_message(from_server)
    return handler


def test_an_export_downloads_while_another_session_runs(browser):
    """Tab A at step 2 presses Export; any file A is told to fetch is announced only after tab B (its own session)
    has stepped twice; the download then holds A's trace: valid JSON at step 2 with the ops that reproduce it."""
    port = int(os.environ.get("PAGED_TEST_PORT", free_port()))
    with app_server(port=port) as srv:
        held: list = []
        a = browser.new_context(accept_downloads=True).new_page()
        a.route_web_socket("**/_stcore/stream", _relay(held))
        b = browser.new_context().new_page()
        step = key_selector("batch.decode") + " >> visible=true"
        for page in (a, b):
            page.goto(f"{srv.base}/Batch_decode?lang=en", wait_until="domcontentloaded")
            wait_idle(page)
        for _ in range(2):
            a.locator(step).click()
            wait_idle(a)
        with a.expect_download(timeout=60000) as info:
            a.locator(key_selector("batch.export") + " >> visible=true").click()
            for _ in range(50):
                if held:
                    break
                a.wait_for_timeout(100)
            for _ in range(2):
                b.locator(step).click()
                wait_idle(b)
            for ws, message in held:
                ws.send(message)
        download = info.value
        assert download.failure() is None, f"the export failed: {download.failure()}"
        trace = json.loads(Path(download.path()).read_text())
        assert trace["step"] == 2 and trace["ops"] == ["d", "d"]
        assert download.suggested_filename == "batch_trace.json"
