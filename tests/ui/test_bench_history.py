"""`python -m ui.bench history` (ui.bench.history): it measures Back, a step and a link at each step asked for, and
late in a long session Back starts from a checkpoint (its cost no longer a replay from step 0)."""

from __future__ import annotations

from ui.bench import main
from ui.bench.history import long_session_specs, time_history


def test_history_measures_each_step_and_back_uses_checkpoints():
    """At steps 5 and 40 every cost is measured (positive), checkpoints exist only at 40, and at 40 Back costs less
    than the replay from step 0 it replaced (both measured in this run)."""
    results = time_history(at=(5, 40), repeat=1)
    assert set(results) == {"step_5", "step_40"}
    for r in results.values():
        assert all(r[k] > 0 for k in ("back_ms", "step_ms", "link_ms", "link_kept_ms", "full_ms"))
    assert results["step_5"]["checkpoints"] == 0 < results["step_40"]["checkpoints"]
    assert results["step_40"]["back_ms"] < results["step_40"]["full_ms"]
    assert [s.at_step for s in long_session_specs()] == sorted(s.at_step for s in long_session_specs())


def test_cli_history_subcommand_is_known(monkeypatch, capsys):
    """`python -m ui.bench history` runs only the history part and prints its table."""
    import ui.bench.history as history

    row = {"back_ms": 1.0, "step_ms": 2.0, "link_ms": 3.0, "link_kept_ms": 1.0, "full_ms": 4.0, "checkpoints": 0,
           "checkpoint_mb": 0.0}
    monkeypatch.setattr(history, "time_history", lambda: {"step_1": row})
    monkeypatch.setattr(history, "time_page_history", lambda: {"page_step_1": {"first_open_ms": 5.0, "open_ms": 1.0,
                                                                               "step_ms": 1.0, "back_ms": 1.0}})
    monkeypatch.setattr(history, "time_page_redraw", lambda: {"redraw_step_10_ms": 2.0, "redraw_step_600_ms": 3.0})
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "page_step_1" in out and "x1.50" in out  # the redraw table's ratio: 3.0 / 2.0


def test_page_redraw_is_timed_at_each_step_asked_for():
    """time_page_redraw opens page 4 by a link, steps the lesson to each step asked for, and times a redraw there."""
    from ui.bench.history import time_page_redraw

    results = time_page_redraw(at=(2, 5), repeat=1)
    assert list(results) == ["redraw_step_2_ms", "redraw_step_5_ms"] and all(v > 0 for v in results.values())


def test_links_bench_opens_each_link_at_once_and_reports_every_ready_time(monkeypatch, capsys):
    """`history --links 2 --steps 40`: two different links opened at once, again, and at two other steps: a sorted,
    positive ready time for each open, and a table naming the three phases (the opens themselves stubbed)."""
    import ui.bench.history as history
    import ui.links

    opened = []
    monkeypatch.setattr(ui.links, "open_link", lambda config, specs, steps, model, tok: opened.append(
        (specs[0].prompt, steps)))
    monkeypatch.setattr("paged.model.io.load_model", lambda _: (None, None))
    results = history.time_links(count=2, steps=40, tag=7)
    assert sorted(opened) == sorted([(history.link_specs(7)[0].prompt, 40), (history.link_specs(8)[0].prompt, 40)] * 2
                                    + [(history.link_specs(7)[0].prompt, 39), (history.link_specs(7)[0].prompt, 38)])
    assert all(len(v) == 2 and v == sorted(v) and all(s > 0 for s in v) for v in results.values())
    assert history.link_specs(7) != history.link_specs(8)
    monkeypatch.setattr(history, "time_links", lambda count, steps: results)
    assert main(["history", "--links", "2", "--steps", "40"]) == 0
    out = capsys.readouterr().out
    assert "steps=40" in out and "first visit" in out and "other steps" in out
