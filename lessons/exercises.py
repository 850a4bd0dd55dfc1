"""Page 13 · Your turn: the learner's own code, checked, and drawn with the pictures of pages 1–4.

The folder comes from the server's environment only (PAGED_EXERCISES=DIR, set by whoever started
it): code never comes from the browser. A check runs in a child process (paged.exercises.check), so
a hang or a crash in the learner's code cannot stall the server; its verdict is kept per session and
run again only when a file changed.

"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from paged.exercises.check import message, passed, run_check
from paged.exercises.exercises import EXERCISES
from paged.exercises.links import LINKS
from paged.exercises.texts import LANGS
from paged.exercises.workspace import FILES

__all__ = ["message", "LANGS"]  # the page shows a failure as the CLI does
EXERCISE_NAMES = tuple(EXERCISES)

ENV = "PAGED_EXERCISES"


def workspace_dir(environ: dict | None = None) -> Path | None:
    """The folder named by PAGED_EXERCISES in the server's environment (None: unset or empty)."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    return Path(value) if value else None


def fingerprint(directory: Path) -> tuple:
    """What changes when the learner saves a file: (name, size, mtime in ns) of each file."""
    out = []
    for name in FILES:
        path = directory / name
        stat = path.stat() if path.is_file() else None
        out.append((name, stat and stat.st_size, stat and stat.st_mtime_ns))
    return tuple(out)


@dataclass
class CheckView:
    """One check of the workspace, as the page shows it."""

    records: list[dict]
    error: str | None = None  # the folder holds no workspace (the check could not start)
    marks: list[tuple[str, str]] = field(
        default_factory=list
    )  # (link, "ok" | "broken" | "unknown")

    @property
    def passed(self) -> bool:
        return self.error is None and passed(self.records)

    @property
    def failure(self) -> dict | None:
        return next((r for r in self.records if not r["ok"]), None)

    def data(self, exercise: str) -> dict | None:
        """The data an exercise returned (or its failure carried), for the pictures."""
        return next((r.get("data") for r in self.records if r["exercise"] == exercise), None)

    def chain(self) -> list[SimpleNamespace]:
        """The learner's locate() of the article's tokens 0..10 (table 7, 2, 9; block_size 4), when
        it passed."""
        data = self.data("locate") or {}
        return [SimpleNamespace(**a) for a in data.get("chain", [])]


def link_marks(records: list[dict]) -> list[tuple[str, str]]:
    """Each link of LINKS, in the chain's order: "broken" for the one the first failure names; "ok"
    for all when every exercise ran and passed; else "unknown" (not yet shown right)."""
    failure = next((r for r in records if not r["ok"]), None)
    if failure is None and passed(records):
        return [(link, "ok") for link in LINKS]
    broken = failure and failure.get("link")
    return [(link, "broken" if link == broken else "unknown") for link in LINKS]


def check(directory: Path) -> CheckView:
    """Run every exercise on the workspace in `directory` (stopping at the first failure)."""
    try:
        records = run_check(directory)
    except ValueError as err:
        return CheckView([], error=str(err))
    return CheckView(records, marks=link_marks(records))


def engine_step(data: dict, step: int) -> dict:
    """Step `step` of the engine exercise's run: its record, and the pool as the learner's tables
    left it (tables and cached counts of the sequences the step fed). Raises ValueError for a step
    outside the run."""
    steps = data.get("steps", [])
    if not 0 <= step < len(steps):
        raise ValueError(f"step {step} outside the run's {len(steps)} steps")
    record = steps[step]
    tables = dict(zip(record["seqs"], record["tables"]))
    cached = dict(zip(record["seqs"], record["context_lens"]))
    return {"record": record, "tables": tables, "cached": cached}
