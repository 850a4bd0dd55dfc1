"""`python -m ui.bench browser`: click -> idle on the stepping pages in a real browser, one session, default settings
(pages 2-6 unless `--pages` names others, or `all`; `--port` picks the server's port).

For each page: open it, click its step button `clicks` times (starting over with its reset button, untimed, every
`cycle` clicks so every timed click is a real step), and report p50 / p95 of click -> app idle and the server's CPU
seconds per rerun; with --busy also the tab's main-thread busy time per click (Chrome's TaskDuration: script,
style, layout and paint), which says where a click's time goes (the Performance domain slows the tab a little).
"""

from __future__ import annotations

import json
import statistics

from .chromium import BrowserUnavailable, app_server, chromium, cpu_seconds, key_selector, timed_click, wait_idle

PAGES = {  # URL path -> (step button key, button that starts over (None: Back until it is disabled), clicks per cycle)
    "Gather_and_attend": ("gather.next", "gather.reset", 8),
    "Batch_decode": ("batch.decode", "batch.reset", 5),
    "Engine": ("engine.step", "engine.reset", 20),
    "Bug_lab": ("buglab.next", None, 5),
    "Sharing": ("sharing.step", "sharing.reset", 20),
    "Beam_search": ("beam.next", "beam.reset", 8),
    "Swap_or_recompute": ("swap.step_btn", "swap.reset", 20),
    "Sliding_window": ("window.step_btn", "window.reset", 15),
    "Speculative_decoding": ("spec.step", "spec.reset", 10),
}
DEFAULT_PAGES = ("Gather_and_attend", "Batch_decode", "Engine", "Bug_lab", "Sharing")  # pages 2-6; --pages for more
VIEWPORT = {"width": 1280, "height": 720}


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between order statistics."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def path_prefix(key: str) -> str:
    return key.split(".")[0]


def browser_busy_s(cdp) -> float:
    """Seconds the tab's main thread has been busy so far (Chrome's Performance metric TaskDuration)."""
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "TaskDuration")


def bench_page(page, base: str, path: str, pid: int, clicks: int, busy_metric: bool = False) -> dict[str, float]:
    """Times of `clicks` clicks on one page's step button, the server CPU and the browser main-thread time they
    cost."""
    step, reset, cycle = PAGES[path]
    page.goto(f"{base}/{path}?lang=en", wait_until="domcontentloaded")
    wait_idle(page)
    page.wait_for_selector(key_selector(step), timeout=30000)
    timed_click(page, key_selector(step))  # warm-up: first figures of this page in this session
    cdp = page.context.new_cdp_session(page) if busy_metric else None
    if cdp:
        cdp.send("Performance.enable")  # it slows the tab a little: off unless asked for
    times, cpu, busy = [], 0.0, 0.0
    done = 1
    for _ in range(clicks):
        if done % cycle == 0 or page.locator(key_selector(step) + " >> visible=true").is_disabled():
            if reset:
                timed_click(page, key_selector(reset))
            else:
                back = key_selector(path_prefix(step) + ".back")
                while not page.locator(back + " >> visible=true").is_disabled():
                    timed_click(page, back)
            done = 0
        before, busy_before = cpu_seconds(pid), browser_busy_s(cdp) if cdp else 0.0
        times.append(timed_click(page, key_selector(step)))
        cpu += cpu_seconds(pid) - before
        busy += browser_busy_s(cdp) - busy_before if cdp else 0.0
        done += 1
    return {"p50_ms": percentile(times, 0.5), "p95_ms": percentile(times, 0.95), "max_ms": max(times),
            "server_cpu_ms_per_rerun": 1000 * cpu / clicks, "browser_ms_per_click": 1000 * busy / clicks if cdp else None,
            "clicks": clicks}


def main(clicks: int, as_json: bool, pages: list[str] | None = None, busy_metric: bool = False,
         port: int | None = None) -> int:
    """Bench `pages` (URL paths of PAGES; pages 2-6 by default, "all" for every one); 2 when no browser can start.
    busy_metric: also the tab's main-thread time per click (Chrome's Performance domain, which slows the tab a
    little). port: the server's (a free one when None)."""
    pages = list(DEFAULT_PAGES) if not pages else list(PAGES) if pages == ["all"] else pages
    bad = [p for p in pages if p not in PAGES]
    if bad:
        raise ValueError(f"pages must be among {sorted(PAGES)}, got {bad}")
    try:
        with app_server(port) as server, chromium() as browser:
            context = browser.new_context(viewport=VIEWPORT, locale="en-US")
            page = context.new_page()
            results = {path: bench_page(page, server.base, path, server.pid, clicks, busy_metric) for path in pages}
            context.close()
    except BrowserUnavailable as err:
        print(f"no browser: {err}")
        return 2
    if as_json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"click -> app idle in chromium, one session, default settings, {clicks} clicks per page "
          f"(viewport {VIEWPORT['width']}x{VIEWPORT['height']})")
    for path, r in results.items():
        print(f"  {path:<20} p50 {r['p50_ms']:6.0f} ms   p95 {r['p95_ms']:6.0f} ms   max {r['max_ms']:6.0f} ms   "
              f"server CPU {r['server_cpu_ms_per_rerun']:5.0f} ms/rerun"
              + (f"   browser {r['browser_ms_per_click']:5.0f} ms/click" if busy_metric else ""))
    print("  median of those p95:", f"{statistics.median(r['p95_ms'] for r in results.values()):.0f} ms")
    return 0
