"""The load benchmark (ui.bench.load, ui.bench.ws) against a real `streamlit run` server: its websocket client
really steps a page, each session keeps its own state, every click is answered, and the numbers it reports are
sane. One server for the module; the cheap page 3 (no model) keeps it short."""

from __future__ import annotations

import asyncio
import json
import math
from urllib.parse import parse_qs

import pytest

from ui.bench.load import PAGES, Server, main, measure, percentile, step, streamlit_server
from ui.bench.ws import WsSession


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as s:
        yield s


def ops_in_url(session: WsSession) -> list[str]:
    """The batch page's op log as the page wrote it into the URL (what a browser's address bar would show)."""
    ops = parse_qs(session.query_string).get("ops", [""])[0]
    return [op for op in ops.split(",") if op]


@pytest.mark.slow
def test_sessions_step_the_page_and_keep_their_own_state(server):
    """Two learners on page 3, clicking concurrently: A decodes 3 times, B once. Each click ends in exactly one
    script_finished, each URL logs exactly that session's own decode steps, and no exception is drawn."""
    clicks = {"A": 3, "B": 1}

    async def learner(session: WsSession, n: int) -> None:
        for _ in range(n):
            await session.click("batch.decode")

    async def scenario():
        sessions = {name: WsSession(server.url, PAGES["batch"].page, "lang=en") for name in clicks}
        try:
            for s in sessions.values():
                await s.open()
                await s.load()
                assert ops_in_url(s) == []  # a fresh session starts from the seed batch
            await asyncio.gather(*(learner(sessions[k], n) for k, n in clicks.items()))
            return {k: (s.finished_runs, ops_in_url(s), s.last.exceptions, s.last.status)
                    for k, s in sessions.items()}
        finally:
            for s in sessions.values():
                await s.close()

    seen = asyncio.run(scenario())
    for name, n in clicks.items():
        finished, ops, exceptions, status = seen[name]
        assert finished == 1 + n, name  # the page load, then one script_finished per click
        assert ops == ["d"] * n, name  # only this session's own decode steps
        # 0: FINISHED_SUCCESSFULLY (a whole run), 3: FINISHED_FRAGMENT_RUN_SUCCESSFULLY (the step's st.fragment)
        assert exceptions == [] and status in (0, 3), name


@pytest.mark.slow
def test_measure_reports_every_click_and_sane_numbers(server):
    """A short measurement with 2 learners: every click answered, fields present, numbers consistent."""
    row = asyncio.run(measure(server, "batch", sessions=2, seconds=3.0, period=1.0, seed=1))
    json.loads(json.dumps(row))  # JSON-ready
    assert row["page"] == "batch" and row["sessions"] == 2 and row["errors"] == []
    assert row["per_session_finished"] == row["per_session_clicks"]
    assert row["reruns"] == sum(row["per_session_clicks"])
    assert all(2 <= c <= 4 for c in row["per_session_clicks"])  # 3 s at one click a second, random phase
    assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["max_ms"]
    assert row["reruns_per_s"] == pytest.approx(row["reruns"] / row["wall_s"])
    assert row["wall_s"] >= 3.0 * 0.9  # the learners clicked until the end of the window
    assert row["cpu_ms_per_rerun"] > 0 and row["server_rss_mib"] > 0 and row["load_p50_ms"] > 0
    for key in ("late", "resets", "client_cpu_s", "server_cpu_share", "load_avg_1m"):
        assert math.isfinite(row[key]) and row[key] >= 0, key


@pytest.mark.slow
def test_a_finished_page_is_reset(server):
    """Page 2 steps through context_len = 10 tokens; once it draws "next" disabled, the learner presses reset
    instead: the URL's step climbs 1..10, stays at 10, then returns to 0 on the one reset. (Page 2 draws its
    buttons before applying the click, so the "next" drawn after the 10th step is still enabled: the reset comes
    at the 11th or 12th click.)"""
    async def scenario():
        s = WsSession(server.url, PAGES["gather"].page, "lang=en")
        try:
            await s.open()
            await s.load()
            resets, url_steps, exceptions = [], [], []
            for _ in range(12):
                resets.append((await step(s, PAGES["gather"], {}))[1])
                url_steps.append(int(parse_qs(s.query_string)["step"][0]))
                exceptions += s.last.exceptions
            return resets, url_steps, s.finished_runs, exceptions
        finally:
            await s.close()

    resets, url_steps, finished, exceptions = asyncio.run(scenario())
    assert sum(resets) == 1 and resets.index(True) >= 10, resets
    reset_at = resets.index(True)
    assert url_steps[:reset_at + 1] == list(range(1, 11)) + [10] * (reset_at - 10) + [0], url_steps
    assert finished == 13 and exceptions == []


def test_percentile_interpolates():
    """Linear interpolation between ranks (numpy's default), checked by hand."""
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert math.isnan(percentile([], 50))


def test_bad_arguments_are_refused():
    """An unknown page or a non-positive count is refused before anything starts."""
    fake = Server(pid=0, port=1)
    with pytest.raises(ValueError, match="page must be one of"):
        asyncio.run(measure(fake, "nope", 1, 1.0))
    with pytest.raises(ValueError, match="sessions"):
        asyncio.run(measure(fake, "batch", 0, 1.0))
    with pytest.raises(ValueError, match="ws://"):
        WsSession("http://127.0.0.1:1/", "Engine")
    with pytest.raises(SystemExit):
        main(["--pages", "nope"])
    with pytest.raises(SystemExit):
        main(["--pages", "batch", "--set", "runner.postScriptGC"])  # NAME=VALUE expected
