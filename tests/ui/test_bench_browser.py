"""`python -m ui.bench browser`'s pure pieces: percentiles, a process's CPU time from /proc, the selector of a keyed
button, and the command line (the old default still means the AppTest benchmark)."""

from __future__ import annotations

import os

from ui.bench.browser import DEFAULT_PAGES, PAGES, percentile
from ui.bench.chromium import cpu_seconds, key_selector
from ui.nav import PAGES as NAV


def test_percentile_interpolates_between_order_statistics():
    assert percentile([5, 1, 3], 0.5) == 3 and percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile(list(range(1, 21)), 0.95) == 19.05 and percentile([7], 0.95) == 7


def test_cpu_seconds_grows_with_work():
    before = cpu_seconds(os.getpid())
    sum(i * i for i in range(300_000))
    assert cpu_seconds(os.getpid()) > before >= 0


def test_key_selector_follows_streamlits_class_names():
    assert key_selector("batch.decode") == ".st-key-batch-decode button"


def test_bench_visits_every_stepping_page_by_its_url_path():
    """The bench knows pages 2-6 (its default) and the chapter pages 9-12, each by the path the navigation uses."""
    assert set(PAGES) == {p.url_path for p in NAV if p.name in ("gather", "batch", "engine", "buglab", "sharing",
                                                                "beam", "swap", "window", "spec")}
    assert set(DEFAULT_PAGES) == {p.url_path for p in NAV if p.name in ("gather", "batch", "engine", "buglab",
                                                                        "sharing")}


def test_cli_browser_subcommand_is_known(monkeypatch, capsys):
    from ui import bench

    seen = {}
    monkeypatch.setattr("ui.bench.browser.main",
                        lambda clicks, as_json, pages=(), port=None: seen.update(clicks=clicks, port=port) or 0)
    assert bench.main(["browser", "--clicks", "3"]) == 0 and seen == {"clicks": 3, "port": None}
    assert bench.main(["browser", "--port", "8661"]) == 0 and seen["port"] == 8661
