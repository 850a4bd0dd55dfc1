"""`python -m ui.bench attack`: does one learner slow the class? A victim steps the engine page once a second, first
alone (quiet), then while one attacker does its worst at the same time, over the websocket (ui.bench.ws):

    links    LINKS tabs at once, each opening a new long link (`steps=600`, its own prompt: nothing kept to reuse),
             closed once drawn and opened again, for the whole measurement
    ledger   one tab at a long link sending ledger values of MAX_LOG new actions (Step / Back alternating), one
             after another as fast as the server answers
    run      one tab on a long session (eight 128-token requests) pressing Run to end, and Reset once at the end,
             one press after another as fast as the server answers
    export   one tab at a long link (its JSON ~2 MB) pressing Export, one press after another as fast as the server
             answers
    sessions SESSIONS new tabs at once, each closed once drawn and a new one opened, for the whole measurement:
             a new session's first run after another (beyond PAGED_MAX_SESSIONS they get the "server full" page)

The victim is one tab kept open from its warm-up to the end (a learner already in the class). Prints the victim's
p50 / p95 quiet and attacked, their ratio, what the attacker got done (with the attacking tabs' first-load times)
and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from urllib.parse import urlencode

from .load import percentile, streamlit_server

LINKS = 5
PAGE = "Engine"  # the victim's page (it steps the engine once a period)
SESSIONS = 45


def _link_query(tag: int) -> str:
    """A `steps=600` link of eight long requests whose first prompt carries `tag` (so no two links are the same)."""
    from lessons.engine_requests import RequestSpec, encode_requests

    specs = [RequestSpec(f"attack {tag} " + "the quick brown fox " * 2, max_tokens=128, at_step=60 * i)
             for i in range(8)]
    return urlencode({"lang": "en", "reqs": encode_requests(specs), "steps": 600})


async def _victim(s, seconds: float, period: float) -> list[float]:
    """The victim's clicks on its own open session `s` (an established learner: the same tab quiet and attacked)."""
    from .load import PAGES, step

    loop, spec, out = asyncio.get_running_loop(), PAGES["engine"], []
    end, t = loop.time() + seconds, loop.time()
    while t < end:
        await asyncio.sleep(max(0.0, t - loop.time()))
        ms, _ = await step(s, spec, {})
        out.append(ms)
        t += period
    return out


async def _links(url: str, stop: asyncio.Event, done: dict) -> None:
    from .ws import WsSession

    tag = 0

    async def one(i: int) -> None:
        nonlocal tag
        while not stop.is_set():
            tag += 1
            s = WsSession(url, "Engine", _link_query(tag))
            try:
                await s.open()
                await s.load()
                done["links"] += 1
            except Exception as err:  # noqa: BLE001 — counted, the attack goes on
                done["errors"].append(f"link: {type(err).__name__}: {err}")
            finally:
                await s.close()

    await asyncio.gather(*(one(i) for i in range(LINKS)))


async def _ledger(url: str, stop: asyncio.Event, done: dict) -> None:
    from ui.ledger import MAX_LOG

    from .ws import WidgetState, WsSession

    s = WsSession(url, "Engine", _link_query(0))
    try:
        await s.open()
        await s.load()
        seq, nonce = 0, "attacker"
        while not stop.is_set():
            log = [[seq + i + 1, "step" if i % 2 else "back", "engine"] for i in range(MAX_LOG)]
            seq += MAX_LOG
            value = {"log": {"nonce": nonce, "seq": seq, "log": log}}
            state = WidgetState(id=s.widget_id("engine.ledger"), json_value=json.dumps(value))
            await s.rerun([state], s.fragment_of("engine.ledger"))
            done["ledger_messages"] += 1
    except Exception as err:  # noqa: BLE001
        done["errors"].append(f"ledger: {type(err).__name__}: {err}")
    finally:
        await s.close()


async def _run(url: str, stop: asyncio.Event, done: dict) -> None:
    from lessons.engine_requests import encode_requests

    from .history import long_session_specs
    from .ws import WsSession

    s = WsSession(url, PAGE, urlencode({"lang": "en", "reqs": encode_requests(long_session_specs())}))
    try:
        await s.open()
        await s.load()
        while not stop.is_set():
            await s.click("engine.reset" if s.widget("engine.run").disabled else "engine.run")
            done["run_presses"] += 1
    except Exception as err:  # noqa: BLE001
        done["errors"].append(f"run: {type(err).__name__}: {err}")
    finally:
        await s.close()


async def _export(url: str, stop: asyncio.Event, done: dict) -> None:
    """Export pressed again and again at a long link (steps=300: ~2 MB of JSON) until `stop`.

    Raises: nothing (errors are counted in done["errors"])."""
    from .ws import WsSession

    s = WsSession(url, "Engine", _link_query(0))
    try:
        await s.open()
        await s.load()
        while not stop.is_set():
            await s.click("engine.export")
            done["export_presses"] += 1
    except Exception as err:  # noqa: BLE001
        done["errors"].append(f"export: {type(err).__name__}: {err}")
    finally:
        await s.close()


async def _sessions(url: str, stop: asyncio.Event, done: dict) -> None:
    from .ws import WsSession

    async def one() -> None:
        while not stop.is_set():
            s = WsSession(url, PAGE, "lang=en")
            try:
                await s.open()
                done["first_load_ms"].append(await s.load())
                done["sessions"] += 1
                done["full_pages"] += any("server is full" in m.lower() for m in s.last.markdown) or \
                    "engine.step" not in s.last.widgets
            except Exception as err:  # noqa: BLE001 — counted, the attack goes on
                done["errors"].append(f"sessions: {type(err).__name__}: {err}")
            finally:
                await s.close()

    await asyncio.gather(*(one() for _ in range(SESSIONS)))


async def run_attack(url: str, seconds: float, period: float, kinds: list[str], warm_s: float = 3.0) -> dict:
    """Quiet, then attacked (each for `seconds`, a victim's click every `period`, after `warm_s` of warm-up
    clicks): the victim's numbers and what the attacker did."""
    from .ws import WsSession

    victim = WsSession(url, PAGE, "lang=en")
    try:
        await victim.open()
        await victim.load()
        await _victim(victim, warm_s, period)  # warm-up: imports, model, first figures
        quiet_load = os.getloadavg()[0]
        quiet = await _victim(victim, seconds, period)
        stop, done = asyncio.Event(), {"links": 0, "ledger_messages": 0, "sessions": 0, "full_pages": 0,
                                       "run_presses": 0, "export_presses": 0, "first_load_ms": [],
                                       "errors": []}
        attackers = [asyncio.create_task(ATTACKS[k](url, stop, done)) for k in kinds]
        await asyncio.sleep(2)  # the attack is under way before the victim measures
        attacked = await _victim(victim, seconds, period)
        attacked_load = os.getloadavg()[0]
        stop.set()
        await asyncio.gather(*attackers)
    finally:
        await victim.close()
    q95, a95 = percentile(quiet, 95), percentile(attacked, 95)
    loads = done.pop("first_load_ms")
    return {"kinds": kinds, "quiet_p50_ms": statistics.median(quiet), "quiet_p95_ms": q95,
            "attacked_p50_ms": statistics.median(attacked), "attacked_p95_ms": a95, "p95_ratio": a95 / q95,
            "victim_clicks": [len(quiet), len(attacked)], "load_avg_1m": [quiet_load, attacked_load],
            "first_load_p50_ms": percentile(loads, 50), "first_load_max_ms": max(loads, default=float("nan")),
            **done}


ATTACKS = {"links": _links, "ledger": _ledger, "sessions": _sessions, "run": _run, "export": _export}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.bench attack", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="victim's clicking time, quiet and attacked")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between the victim's clicks")
    parser.add_argument("--attack", default="links,ledger,sessions,run",
                        help="comma-separated: " + ",".join(ATTACKS))
    parser.add_argument("--port", type=int, default=None, help="the server's loopback port (default: a free one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    kinds = [k.strip() for k in args.attack.split(",") if k.strip()]
    if not kinds or any(k not in ATTACKS for k in kinds) or args.seconds <= 0:
        parser.error(f"--attack takes {', '.join(ATTACKS)}; --seconds > 0 (got {args.attack!r}, {args.seconds})")
    with streamlit_server(port=args.port) as server:
        result = asyncio.run(run_attack(server.url, args.seconds, args.period, kinds))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"victim (engine page, a step every {args.period:g} s): quiet p50 {result['quiet_p50_ms']:.0f} ms "
              f"p95 {result['quiet_p95_ms']:.0f} ms; attacked ({','.join(kinds)}) p50 {result['attacked_p50_ms']:.0f} "
              f"ms p95 {result['attacked_p95_ms']:.0f} ms: p95 x{result['p95_ratio']:.2f}; load average "
              f"{result['load_avg_1m'][0]:.1f} -> {result['load_avg_1m'][1]:.1f}")
        print(f"attacker: {result['links']} links opened, {result['ledger_messages']} ledger messages, "
              f"{result['run_presses']} Run to end presses, {result['export_presses']} Export presses, "
              f"{result['sessions']} sessions ({result['full_pages']} told the server is full; first load p50 "
              f"{result['first_load_p50_ms']:.0f} ms, max {result['first_load_max_ms']:.0f} ms), "
              f"{len(result['errors'])} errors {result['errors'][:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
