"""The house has floors and the arrows point down: pages -> ui -> viz / lessons -> paged.

paged/ imports none of streamlit, ui, lessons, viz; lessons/ imports neither streamlit, ui nor viz; viz/ imports
neither streamlit, ui nor lessons. Above paged/, nothing reaches into the engine's internals (block manager,
scheduler): what a page draws comes from a StepTrace or an EngineView.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"paged": {"streamlit", "ui", "lessons", "viz"}, "lessons": {"streamlit", "ui", "viz"},
             "viz": {"streamlit", "ui", "lessons"}}
INTERNALS = re.compile(r"\.(block_manager|scheduler)\b|\bengine\.sequences\b|\bengine\.groups\b")


def imported_roots(path: Path) -> set[str]:
    """Top-level package names a file imports (absolute imports; relative ones stay inside its floor)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("floor", sorted(FORBIDDEN))
def test_arrows_point_down(floor):
    bad = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & FORBIDDEN[floor])
           for p in sorted((ROOT / floor).rglob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}


def test_the_checker_sees_a_wrong_arrow(tmp_path):
    """The checker itself can fail: an upward import is found, one inside a function too."""
    f = tmp_path / "x.py"
    f.write_text("import torch\ndef g():\n    from ui.params import int_in\n    import streamlit as st\n")
    assert imported_roots(f) & FORBIDDEN["paged"] == {"ui", "streamlit"}


def test_nothing_above_paged_reads_engine_internals():
    files = [ROOT / "app.py", *(ROOT / "app_pages").glob("*.py")] + [
        p for floor in ("ui", "viz", "lessons") for p in (ROOT / floor).rglob("*.py")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if INTERNALS.search(line) and not line.lstrip().startswith(("from ", "import ", "#"))]
    assert not hits
