"""Time of one step of the app, at default sizes: `python -m ui.bench [--clicks N] [--json]` (server side, AppTest) or
`python -m ui.bench browser [--clicks N] [--json]` (a real browser, one session).

For "Next token" on page 2 and "Decode step" on page 3 it reports, as medians over N clicks:
    script   the page script's own run per click: what the server spends on a step (AppTest runs the page inside a
             thin wrapper that times it)
    round    the whole AppTest round trip per click (script + the test harness), an upper bound
and the paged/ compute alone (no Streamlit, no figures): building the gather scene and attending, and one
batch-decode step with its paged-vs-contiguous check.

After them, the history costs (ui.bench.history): Back, one step and opening a share link at step 10 and at step
600 of one long engine session, with the replay from step 0 they used to cost (`python -m ui.bench history` alone).

`browser` starts `streamlit run app.py` and Debian's chromium (ui.bench.chromium), opens pages 2-6 (`--pages all`: also
the chapter pages 9-12; `--pages Sharing,Beam_search`: those) at default settings and clicks each page's step button
N times: p50 / p95 of click -> app idle (the script state back to notRunning), and the server's CPU time per rerun
(utime + stime from /proc/<pid>/stat, before and after the clicks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = """\
import runpy, sys, time
sys.path.insert(0, {root!r})
import streamlit as st
_start = time.perf_counter()
try:
    runpy.run_path({page!r}, run_name="__main__")
finally:
    st.session_state["_bench_script_ms"] = (time.perf_counter() - _start) * 1000
"""
STEPS = {  # page -> (button that steps, how to tell the step can't go on, button that starts over)
    "app_pages/2_Gather_and_attend.py": ("gather.next", lambda at: at.session_state["gather.step"] >= 10,
                                     "gather.reset"),
    "app_pages/3_Batch_decode.py": ("batch.decode", lambda at: len(at.session_state["batch.lesson"].ops) >= 5,
                                "batch.reset"),
}


def time_page(page: str, clicks: int) -> dict[str, float]:
    """Median script time and AppTest round trip (ms) of the page's step button over `clicks` clicks."""
    from streamlit.testing.v1 import AppTest

    button, exhausted, restart = STEPS[page]
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "bench_page.py"
        wrapper.write_text(WRAPPER.format(root=str(ROOT), page=str(ROOT / page)))
        at = AppTest.from_file(str(wrapper), default_timeout=60).run()
        at.button(key=button).click().run()  # warm-up: first imports and first figures
        script, round_trip = [], []
        for _ in range(clicks):
            if exhausted(at):
                at.button(key=restart).click().run()  # start over (not timed) so every timed click is a real step
            start = time.perf_counter()
            at.button(key=button).click().run()
            round_trip.append((time.perf_counter() - start) * 1000)
            script.append(at.session_state["_bench_script_ms"])
            if at.exception:
                raise RuntimeError(f"{page} raised: {at.exception[0].value}")
    return {"script_ms": statistics.median(script), "round_trip_ms": statistics.median(round_trip)}


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def time_compute(repeat: int) -> dict[str, float]:
    """The paged/ work behind each step, without Streamlit or figures (ms, medians)."""
    from lessons.batch import BatchConfig, BatchLesson
    from lessons.gather import GatherConfig, GatherLesson

    def decode_step():
        demo = BatchLesson(BatchConfig())
        start = time.perf_counter()
        demo.apply("d")
        return (time.perf_counter() - start) * 1000

    decode = statistics.median(decode_step() for _ in range(repeat))
    return {"gather_scene_and_attend_ms": _median_ms(lambda: GatherLesson(GatherConfig()).result(), repeat),
            "batch_decode_step_ms": decode}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["load"]:  # a whole class on one server, over the websocket (its own options)
        from .load import main as load_main
        return load_main(argv[1:])
    if argv[:1] == ["attack"]:  # one victim, quiet and while one attacker does its worst (its own options)
        from .attack import main as attack_main
        return attack_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m ui.bench", description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=["server", "browser", "history"], default="server",
                        help="server: script time through AppTest, then history (default); browser: click -> idle "
                             "in chromium; history: Back / step / link at step 10 and 600 only")
    parser.add_argument("--clicks", type=int, default=None, help="timed clicks per page (7 server, 20 browser)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--pages", default="", help="browser: comma-separated URL paths (default: pages 2-6; "
                                                     "all: also 9-12)")
    parser.add_argument("--port", type=int, default=None, help="browser: the server's port (default: a free one)")
    parser.add_argument("--busy", action="store_true", help="browser: also the tab's main-thread ms per click")
    parser.add_argument("--links", type=int, default=0, metavar="COUNT",
                        help="history: only COUNT different long links opened at once")
    parser.add_argument("--steps", type=int, default=300, help="history --links: the links' steps")
    args = parser.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if args.what == "browser":
        from .browser import main as browser_main
        pages = [p for p in args.pages.split(",") if p]
        return browser_main(args.clicks or 20, args.json, pages, port=args.port,
                            **({"busy_metric": True} if args.busy else {}))
    args.clicks = args.clicks or 7
    from ui.page import configure_torch

    from .history import (print_history, print_links, print_page_history, print_page_redraw,
                          time_history, time_links, time_page_history, time_page_redraw)

    configure_torch()  # what every page does first
    if args.what == "history" and args.links:
        links = time_links(args.links, args.steps)
        if args.json:
            print(json.dumps(links, indent=2))
        else:
            print_links(links, args.links, args.steps)
        return 0
    if args.what == "history":
        history, page_history, redraw = time_history(), time_page_history(), time_page_redraw()
        if args.json:
            print(json.dumps({"history": history, "page_history": page_history, "page_redraw": redraw}, indent=2))
        else:
            print_history(history)
            print_page_history(page_history)
            print_page_redraw(redraw)
        return 0
    pages = {page: time_page(page, max(1, args.clicks)) for page in STEPS}
    compute = time_compute(max(3, args.clicks))
    history, page_history, redraw = time_history(), time_page_history(), time_page_redraw()
    if args.json:
        print(json.dumps({"pages": pages, "compute": compute, "history": history, "page_history": page_history,
                          "page_redraw": redraw}, indent=2))
        return 0
    print(f"server time of one step at default sizes (median of {args.clicks} clicks)")
    for page, t in pages.items():
        print(f"  {Path(page).stem:<22} {STEPS[page][0]:<14} script {t['script_ms']:6.1f} ms   "
              f"AppTest round trip {t['round_trip_ms']:6.1f} ms")
    print("paged compute alone")
    for name, ms in compute.items():
        print(f"  {name:<28} {ms:6.2f} ms")
    print_history(history)
    print_page_history(page_history)
    print_page_redraw(redraw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
