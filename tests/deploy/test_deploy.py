"""deploy/run.sh: two app replicas behind nginx, on loopback. Health answers through the proxy; nginx gives a new
browser a sticky cookie; two real browser sessions on page 3 ("Batch decode"), on different replicas, click
"Next step" in turn, and each keeps its own step count over many reruns, through one websocket, on one replica.

Skips when nginx, chromium or playwright is missing, unless PAGED_REQUIRE_BROWSER=1 (CI), which fails instead.
Every process started here is stopped in a finally (deploy/stop.sh, by the pid files run.sh wrote).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import free_port_block

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
LOG_LINE = re.compile(r'"(?P<request>[^"]*)" (?P<status>\d+) upstream=(?P<upstream>\S+) sticky=(?P<sticky>\S+)')
IDLE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app !== null && app.getAttribute('data-test-script-state') === 'notRunning'
        && document.querySelector('[data-testid="stStatusWidgetRunningIcon"]') === null
        && document.querySelector('[data-testid="stMain"] h1') !== null;
}"""

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("PAGED_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PAGED_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def _get(url: str, cookie: str | None = None) -> tuple[str, list[str]]:
    """GET through the proxy (with the sticky cookie, if given): the body and every Set-Cookie header."""
    req = urllib.request.Request(url, headers={"Cookie": f"paged_replica={cookie}"} if cookie else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode(), resp.headers.get_all("Set-Cookie") or []


def _log(run_dir: Path) -> list[dict]:
    return [m.groupdict() for m in map(LOG_LINE.search, (run_dir / "access.log").read_text().splitlines()) if m]


def _wait_idle(page, timeout_ms: int = 60000) -> None:
    """The script run is over (looked at twice, 250 ms apart: a rerun may start just after the first look)."""
    page.wait_for_function(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(250)
    page.wait_for_function(IDLE, timeout=timeout_ms)


def _step_shown(page) -> int | None:
    """The step number in the page's "Step N: ..." message (None before the first decode step)."""
    text = page.locator('[data-testid="stMain"]').inner_text()
    found = re.search(r"Step (\d+): each running sequence", text)
    return int(found.group(1)) if found else None


@pytest.fixture
def deployment(tmp_path):
    """deploy/run.sh 2 PORT RUN_DIR; yields (base URL, RUN_DIR); deploy/stop.sh RUN_DIR afterwards, always."""
    if not os.access(NGINX, os.X_OK):
        _skip_or_fail(f"nginx is not installed (looked for {NGINX}; apt-get install nginx)")
    port = free_port_block(2)
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHON": sys.executable, "NGINX_BIN": NGINX, "HEALTH_TIMEOUT": "90"}
    try:
        proc = subprocess.run(["bash", str(ROOT / "deploy" / "run.sh"), "2", str(port), str(run_dir)], env=env,
                              capture_output=True, text=True, timeout=150)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"url http://127.0.0.1:{port}/" in proc.stdout
        yield f"http://127.0.0.1:{port}", run_dir
    finally:
        pids = [int(f.read_text().split()[0]) for f in run_dir.glob("*.pid")]  # "PID START" (nginx.pid: PID)
        stop = subprocess.run(["bash", str(ROOT / "deploy" / "stop.sh"), str(run_dir)], env=env,
                              capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and "zombie" not in _proc_state(p)]
        assert not alive, f"still running after stop.sh: {alive}"


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"  # gone between the two looks


@pytest.fixture
def browser():
    if not Path(CHROMIUM).exists():
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


def test_two_replicas_behind_nginx_keep_each_session_on_its_own_replica(browser, deployment):
    """Health through the proxy; a cookie-less request gets a sticky cookie that then always reaches one replica;
    two browser sessions on different replicas click Next step 6 and 4 times, interleaved, and each shows its own
    step count after every click; each used one websocket (/_stcore/stream, 101) on its replica and nothing else."""
    base, run_dir = deployment
    assert _get(f"{base}/_stcore/health")[0] == "ok"
    _, set_cookies = _get(f"{base}/_stcore/health?fresh")
    cookie = re.search(r"paged_replica=([0-9a-f]{32}); Path=/", " ".join(set_cookies))
    assert cookie, f"no sticky cookie set by nginx: {set_cookies}"
    assert not any("paged_replica" in c for c in _get(f"{base}/_stcore/health", cookie.group(1))[1])
    for i in range(4):
        _get(f"{base}/_stcore/health?again={i}", cookie.group(1))
    again = {e["upstream"] for e in _log(run_dir) if "again=" in e["request"]}
    assert len(again) == 1, f"one cookie reached several replicas: {again}"

    # Two keys that nginx routes to different replicas (found by asking it), one per browser session.
    routes: dict[str, str] = {}
    for i in range(64):
        _get(f"{base}/_stcore/health?probe={i}", f"probe{i}")
    for e in _log(run_dir):
        if "probe=" in e["request"]:
            routes.setdefault(e["upstream"], e["sticky"])
    assert len(routes) == 2, f"64 keys all went to {set(routes)}"
    (up_a, key_a), (up_b, key_b) = sorted(routes.items())

    sessions = {}
    for name, key in (("A", key_a), ("B", key_b)):
        context = browser.new_context(viewport={"width": 1400, "height": 1600}, locale="en-US")
        context.add_cookies([{"name": "paged_replica", "value": key, "url": base}])
        page = context.new_page()
        page.goto(f"{base}/Batch_decode?lang=en&num_blocks=64", wait_until="domcontentloaded")  # room for 12+ steps
        _wait_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert _step_shown(page) is None
        sessions[name] = (context, page)

    clicks = {"A": 0, "B": 0}
    for name in "ABABABABAA":  # A: 6 steps, B: 4, interleaved
        page = sessions[name][1]
        page.get_by_role("button", name="Next step").click()
        clicks[name] += 1
        page.wait_for_function(f"() => document.body.innerText.includes('Step {clicks[name]}: each running')",
                               timeout=30000)
        _wait_idle(page)
        assert _step_shown(page) == clicks[name], f"session {name} after {clicks[name]} clicks"
        assert page.locator('[data-testid="stException"]').count() == 0
    for name, want in (("A", 6), ("B", 4)):  # the other session's clicks never leaked in
        assert _step_shown(sessions[name][1]) == want
        assert "ops=" + "%2C".join(["d"] * want) in sessions[name][1].url.replace(",", "%2C")

    for context, _ in sessions.values():
        context.close()  # nginx logs a websocket when it closes
    deadline = time.monotonic() + 10
    while len([e for e in _log(run_dir) if e["request"].startswith("GET /_stcore/stream")]) < 2:
        assert time.monotonic() < deadline, "nginx never logged both websockets"
        time.sleep(0.25)
    for key, upstream in ((key_a, up_a), (key_b, up_b)):
        mine = [e for e in _log(run_dir) if e["sticky"] == key]
        assert {e["upstream"] for e in mine} == {upstream}, f"session {key} was served by several replicas"
        streams = [e for e in mine if e["request"].startswith("GET /_stcore/stream")]
        assert [e["status"] for e in streams] == ["101"], f"session {key}: websockets {streams}"
