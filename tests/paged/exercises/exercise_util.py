"""Workspaces for the exercise tests: the reference solution with one learner's mistake written in,
and an in-process run of the exercises (the same code path as the checker's child process)."""

from __future__ import annotations

from pathlib import Path

from paged.exercises.runner import run_exercises
from paged.exercises.workspace import init_workspace, unload_workspace

NAMES = [
    "locate",
    "slot_mapping",
    "write_kv",
    "gather_loop",
    "gather",
    "attention",
    "decode",
    "block_manager",
    "state_rule",
    "engine",
]


def workspace(
    root: Path, edits: dict[str, list[tuple[str, str]]] | None = None, solution: bool = True
) -> Path:
    """A workspace in `root` (the solution, or the stubs), then each file's (old, new) replacements;
    each old text must occur exactly once (a mistake that silently failed to apply would make a test
    pass for nothing)."""
    init_workspace(root, solution=solution)
    for name, pairs in (edits or {}).items():
        path = root / name
        text = path.read_text(encoding="utf-8")
        for old, new in pairs:
            assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {name}"
            text = text.replace(old, new)
        path.write_text(text, encoding="utf-8")
    return root


def run(root: Path, names: list[str] | None = None) -> list[dict]:
    """The exercises `names` (default all) on the workspace in `root`, in process; records as the
    checker's."""
    try:
        return list(run_exercises(root, names or NAMES))
    finally:
        unload_workspace(root)
