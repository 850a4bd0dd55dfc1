"""A whole class on one server: N learners step a page every few seconds; what does the server spend?

    python -m ui.bench load --pages batch,engine --sessions 1,10,30 --seconds 20 [--period 2] [--json]

Starts `streamlit run app.py` on a free loopback port (the app's .streamlit/config.toml applies) and drives it from
this one asyncio process over the websocket protocol, as browsers would (ui.bench.ws), so no browser shares the
CPUs with the server. For each page and N: N sessions open the page (one at a time, not timed), then each clicks
the page's step button every `period` s with a random phase for `seconds` s; a session whose previous click has
not finished clicks as soon as it has ("late"). Reported per page and N:
    p50 / p95 / max   ms from sending a click's rerun to its script_finished (the server side of a click)
    reruns/s          reruns served per second of the run (until the last click finished)
    cpu/rerun         server process CPU (utime + stime from /proc/<pid>/stat) over the run / reruns
    late, errors      clicks that waited for their own previous one; exceptions drawn and failed clicks
    load              the machine's 1-minute load average at the start (other processes distort every number)
A page's step that can't go on (the engine ran out of requests, the gather reached the end) is followed by its
reset button (page 5: its Back). Everything is stopped in a `finally`. `--set name=value` passes a
streamlit config option to the server (A/B a setting without editing .streamlit/config.toml).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
CLK_TCK = os.sysconf("SC_CLK_TCK")
MAX_SESSIONS = 200


@dataclass(frozen=True)
class StepSpec:
    """How a learner steps one page: its URL name, the step widget's key, the button that starts over when the
    step button is disabled (None: the step never ends), and whether the step widget is a slider."""
    page: str
    step: str
    reset: str | None = None
    slider: bool = False


PAGES = {
    "gather": StepSpec("Gather_and_attend", "gather.next", "gather.reset"),
    "batch": StepSpec("Batch_decode", "batch.decode", "batch.reset"),
    "engine": StepSpec("Engine", "engine.step", "engine.reset"),
    "buglab": StepSpec("Bug_lab", "buglab.next", "buglab.back"),  # at the last step: one back, then on
    "sharing": StepSpec("Sharing", "sharing.step", "sharing.reset"),
    "beam": StepSpec("Beam_search", "beam.next", "beam.reset"),  # page 9 (not among the defaults)
}


@dataclass(frozen=True)
class Server:
    """A running streamlit server: its process id (for /proc CPU) and loopback port."""
    pid: int
    port: int

    @property
    def url(self) -> str:
        """The websocket address browsers open."""
        return f"ws://127.0.0.1:{self.port}/_stcore/stream"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(options: dict[str, str] | None = None, timeout_s: float = 90.0, port: int | None = None,
                     env: dict[str, str] | None = None) -> Iterator[Server]:
    """`streamlit run app.py` on a free loopback port, healthy when yielded, terminated (then killed) on exit.
    `options` are extra config options (e.g. {"runner.postScriptGC": "false"}) given as --name value.
    `port`: a given loopback port (default: a free one); `env`: extra environment variables for the server.
    RuntimeError with the server's log tail if it does not answer /_stcore/health within `timeout_s`."""
    port = port or free_port()
    extra = [arg for name, value in (options or {}).items() for arg in (f"--{name}", value)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1", *extra],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})})
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                        if r.read() == b"ok":
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"streamlit did not start (exit {proc.poll()}): "
                                       f"{log.read().decode(errors='replace')[-2000:]}")
                time.sleep(0.2)
            yield Server(proc.pid, port)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def process_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds used so far: utime + stime, resident memory in MiB) of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    utime, stime, rss_pages = int(fields[11]), int(fields[12]), int(fields[21])
    return (utime + stime) / CLK_TCK, rss_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; nan for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


async def step(session, spec: StepSpec, state: dict) -> tuple[float, bool]:
    """One learner's step on its page: (ms, whether it was a reset instead, the step being disabled)."""
    if spec.slider:
        proto = session.widget(spec.step)
        if "value" not in state:
            state["value"] = proto.value[0] if proto.set_value and proto.value else proto.default[0]
        state["value"] = state["value"] + 1 if state["value"] + 1 <= proto.max else proto.min
        return await session.set_slider(spec.step, state["value"]), False
    if spec.reset is not None and session.widget(spec.step).disabled:
        return await session.click(spec.reset), True
    return await session.click(spec.step), False


async def _learner(session, spec: StepSpec, first: float, end: float, period: float) -> dict:
    loop = asyncio.get_running_loop()
    out = {"ms": [], "resets": 0, "late": 0, "clicks": 0, "error": None}
    state: dict = {}
    t = first
    while t < end:
        delay = t - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        elif delay < -0.01:
            out["late"] += 1
        out["clicks"] += 1
        try:
            ms, was_reset = await step(session, spec, state)
        except Exception as err:  # a failed click is reported, and this learner stops
            out["error"] = f"{type(err).__name__}: {err}"
            break
        out["ms"].append(ms)
        out["resets"] += was_reset
        t += period
    return out


async def measure(server: Server, name: str, sessions: int, seconds: float, period: float = 2.0,
                  seed: int = 0) -> dict:
    """N learners on one page (see the module docstring); returns the numbers as a JSON-ready dict."""
    from .ws import WsSession

    if name not in PAGES:
        raise ValueError(f"page must be one of {sorted(PAGES)}, got {name!r}")
    if not 1 <= sessions <= MAX_SESSIONS or seconds <= 0 or period <= 0:
        raise ValueError(f"need 1 <= sessions <= {MAX_SESSIONS}, seconds > 0, period > 0; "
                         f"got {sessions}, {seconds}, {period}")
    spec, rng, loop = PAGES[name], random.Random(seed), asyncio.get_running_loop()
    learners = [WsSession(server.url, spec.page, "lang=en") for _ in range(sessions)]
    try:
        loads = []
        for s in learners:
            await s.open()
            loads.append(await s.load())
            s.widget(spec.step)  # the page drew its step widget (KeyError naming what it drew otherwise)
        load_avg, (cpu0, _), client0 = os.getloadavg()[0], process_stats(server.pid), time.process_time()
        start = loop.time() + 0.05
        results = await asyncio.gather(*(_learner(s, spec, start + rng.uniform(0, period), start + seconds, period)
                                         for s in learners))
        wall = loop.time() - start
        (cpu1, rss), client = process_stats(server.pid), time.process_time() - client0
        exceptions = sorted({e for s in learners for e in s.last.exceptions})
    finally:
        for s in learners:
            await s.close()
    ms = [m for r in results for m in r["ms"]]
    reruns = len(ms)
    return {
        "page": name, "sessions": sessions, "seconds": seconds, "period_s": period,
        "reruns": reruns, "resets": sum(r["resets"] for r in results), "late": sum(r["late"] for r in results),
        "p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95), "max_ms": max(ms, default=float("nan")),
        "reruns_per_s": reruns / wall, "cpu_ms_per_rerun": (cpu1 - cpu0) * 1000 / max(reruns, 1),
        "server_cpu_share": (cpu1 - cpu0) / wall, "wall_s": wall, "client_cpu_s": client,
        "server_rss_mib": rss, "load_p50_ms": statistics.median(loads), "load_avg_1m": load_avg,
        "per_session_clicks": [r["clicks"] for r in results],
        "per_session_finished": [s.finished_runs - 1 for s in learners],  # minus the page load
        "errors": [r["error"] for r in results if r["error"]] + exceptions,
    }


async def warm_up(server: Server, name: str) -> None:
    """First imports, model load and first figures of a page, in a session of its own (not measured)."""
    from .ws import WsSession

    s = WsSession(server.url, PAGES[name].page, "lang=en")
    try:
        await s.open()
        await s.load()
        for _ in range(2):
            await step(s, PAGES[name], {})
    finally:
        await s.close()


async def run_bench(server: Server, pages: list[str], sessions: list[int], seconds: float, period: float,
                    seed: int = 0, progress=None) -> list[dict]:
    """Every (page, N) measurement in turn, each page warmed up first; `progress(row)` is called after each."""
    rows = []
    for name in pages:
        await warm_up(server, name)
        for n in sessions:
            rows.append(await measure(server, name, n, seconds, period, seed))
            if progress:
                progress(rows[-1])
            await asyncio.sleep(1.0)  # let the closed sessions' runners wind down
    return rows


def format_row(r: dict) -> str:
    return (f"{r['page']:<8} N={r['sessions']:<3} p50 {r['p50_ms']:7.0f} ms  p95 {r['p95_ms']:7.0f} ms  "
            f"max {r['max_ms']:7.0f} ms  {r['reruns_per_s']:5.2f} reruns/s  cpu/rerun {r['cpu_ms_per_rerun']:6.1f} ms"
            f"  late {r['late']:3d}  errors {len(r['errors'])}  load {r['load_avg_1m']:.1f}")


def _csv(text: str, kind) -> list:
    return [kind(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.bench load", description=__doc__.splitlines()[0])
    parser.add_argument("--pages", default="batch,engine,buglab,sharing", help=f"comma-separated: {','.join(PAGES)}")
    parser.add_argument("--sessions", default="1,10,20,30", help="comma-separated numbers of learners")
    parser.add_argument("--seconds", type=float, default=20.0, help="clicking time per measurement")
    parser.add_argument("--period", type=float, default=2.0, help="seconds between one learner's clicks")
    parser.add_argument("--seed", type=int, default=0, help="seed of the learners' phases")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a streamlit config option for the server, e.g. runner.postScriptGC=false")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    pages, sessions = _csv(args.pages, str.strip), _csv(args.sessions, int)
    bad = [p for p in pages if p not in PAGES] + [n for n in sessions if not 1 <= n <= MAX_SESSIONS]
    bad += [o for o in args.set if "=" not in o or not o.split("=", 1)[0].strip()]
    if bad or not pages or not sessions or args.seconds <= 0 or args.period <= 0:
        parser.error(f"pages must be among {','.join(PAGES)}, 1 <= sessions <= {MAX_SESSIONS}, --set NAME=VALUE, "
                     f"seconds and period > 0 (bad: {bad or 'empty or non-positive'})")
    options = dict(o.split("=", 1) for o in args.set)
    out = sys.stderr if args.json else sys.stdout  # with --json, stdout holds only the JSON
    show = lambda r: print(format_row(r), file=out, flush=True)  # noqa: E731
    with streamlit_server(options) as server:
        rows = asyncio.run(run_bench(server, pages, sessions, args.seconds, args.period, args.seed, show))
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
