"""Tabs opened and closed without pause (`python -m ui.bench attack --attack sessions`, shortened) do not slow a
learner already in: against a real `streamlit run` server, in one run, the victim's median click while the tabs
churn stays within twice its quiet median. Before ui.capacity's gate gave way to established runs, the file watcher
was turned off and ui.heap froze the imported libraries, it was 15-25x."""

from __future__ import annotations

import asyncio

import pytest

from ui.bench.attack import run_attack
from ui.bench.load import streamlit_server


@pytest.mark.slow
def test_churning_new_tabs_leave_a_learners_clicks_quick():
    """Victim: 10 clicks quiet, 10 while 45 tabs open and close; its attacked median <= 2x its quiet one, and the
    attack really ran (dozens of tabs drew a page)."""
    with streamlit_server() as server:
        r = asyncio.run(run_attack(server.url, seconds=5, period=0.5, kinds=["sessions"], warm_s=1.5))
    assert r["sessions"] >= 20 and not r["errors"], r
    ratio = r["attacked_p50_ms"] / r["quiet_p50_ms"]
    assert ratio <= 2.0, (f"median x{ratio:.2f} (p95 x{r['p95_ratio']:.2f}), load {r['load_avg_1m']}", r)
