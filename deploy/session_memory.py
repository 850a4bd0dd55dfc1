"""What one more learner costs a replica in memory: the server's resident set (VmRSS) before and after K sessions.

    python deploy/session_memory.py --page engine --sessions 20 --steps 5 [--port 8621]

Starts `streamlit run app.py` (ui.bench_load.streamlit_server), opens 2 sessions on the page over the websocket
protocol (ui.bench_ws, as a browser would) to warm it up (imports, caches, the model), reads VmRSS, opens K more
sessions, each loading the page and clicking its step button `--steps` times, keeps them all connected, reads
VmRSS again and prints (after - before) / K. The server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ui.bench_load as bench_load  # noqa: E402
from ui.bench_ws import WsSession  # noqa: E402


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def open_sessions(server, spec, count: int, steps: int, keep: list) -> None:
    for _ in range(count):
        session = WsSession(server.url, spec.page, "lang=en")
        await session.open()
        await session.load()
        for _ in range(steps):
            await session.click(spec.step)
        keep.append(session)


async def measure(page: str, sessions: int, steps: int) -> None:
    spec = bench_load.PAGES[page]
    with bench_load.streamlit_server() as server:
        keep: list[WsSession] = []
        try:
            await open_sessions(server, spec, 2, steps, keep)
            await asyncio.sleep(2)
            before = rss_bytes(server.pid)
            await open_sessions(server, spec, sessions, steps, keep)
            await asyncio.sleep(2)
            after = rss_bytes(server.pid)
        finally:
            for session in keep:
                await session.close()
    print(f"{page}, {steps} steps each: {before / 2**20:.0f} MB after 2 sessions, {after / 2**20:.0f} MB after "
          f"{sessions} more: {(after - before) / sessions / 2**20:.2f} MB per session")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="engine", choices=sorted(bench_load.PAGES))
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--port", type=int, default=None, help="the server's port (default: a free one)")
    args = parser.parse_args()
    if args.port is not None:
        bench_load.free_port = lambda: args.port
    asyncio.run(measure(args.page, args.sessions, args.steps))


if __name__ == "__main__":
    main()
