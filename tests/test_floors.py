"""The house has floors and the arrows point down: pages -> ui -> viz / lessons -> paged.

paged/ imports none of streamlit, ui, lessons, viz, benchmarks; benchmarks/ (beside paged/, outside the library: the
pages and lessons may run it) imports none of streamlit, ui, lessons, viz; lessons/ imports neither streamlit, ui nor
viz; viz/ imports neither streamlit, ui nor lessons. Above paged/, nothing reaches into the engine's internals (block
manager, scheduler): what a page draws comes from a StepTrace or an EngineView.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"paged": {"streamlit", "ui", "lessons", "viz", "benchmarks"}, "lessons": {"streamlit", "ui", "viz"},
             "viz": {"streamlit", "ui", "lessons"}, "benchmarks": {"streamlit", "ui", "lessons", "viz"}}
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


def app_files(*floors: str) -> list[Path]:
    """app.py, the page scripts and every .py under the given floors: the code above tests/ a rule walks."""
    return [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))] + [
        p for floor in floors for p in sorted((ROOT / floor).rglob("*.py"))]


@pytest.mark.parametrize("floor", sorted(FORBIDDEN))
def test_arrows_point_down(floor):
    bad = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & FORBIDDEN[floor])
           for p in sorted((ROOT / floor).rglob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}


def test_the_checker_sees_a_wrong_arrow(tmp_path):
    """The checker itself can fail: an upward import is found, one inside a function too."""
    f = tmp_path / "x.py"
    f.write_text("import torch\ndef g():\n    from ui.parsers import int_in\n    import streamlit as st\n"
                 "    from benchmarks.kernels import bench_case\n")
    assert imported_roots(f) & FORBIDDEN["paged"] == {"ui", "streamlit", "benchmarks"}


def test_nothing_above_paged_reads_engine_internals():
    files = app_files("ui", "viz", "lessons")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if INTERNALS.search(line) and not line.lstrip().startswith(("from ", "import ", "#"))]
    assert not hits


# --- one way to count blocks: a ceil division by the block size is paged.addressing.blocks_needed ----------------
BLOCK_SIZE_NAMES = {"block_size", "bs"}
# Instances in files other engineers own, to be folded into blocks_needed by them (a file may only go down).
KNOWN_CEIL_DIVS: dict[str, int] = {}  # files allowed to count blocks by hand, and how often: none left


def _is_block_size(node: ast.AST) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return name in BLOCK_SIZE_NAMES


def block_ceil_divs(source: str) -> list[int]:
    """Line numbers of `-(-n // block_size)` and `(n + block_size - 1) // block_size` (block_size or bs, a name or
    an attribute): block counts spelled out instead of calling blocks_needed."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and _is_block_size(node.right)):
            continue
        negated = isinstance(node.left, ast.UnaryOp) and isinstance(node.left.op, ast.USub)
        inside = list(ast.walk(node.left))  # n + block_size - 1 parses as (n + block_size) - 1
        rounded_up = isinstance(node.left, ast.BinOp) and any(_is_block_size(n) for n in inside) and any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and getattr(n.right, "value", None) == 1
            for n in inside)
        if negated or rounded_up:
            lines.append(node.lineno)
    return sorted(lines)


def test_block_counts_go_through_blocks_needed():
    """Outside paged/addressing.py no code above tests/ counts blocks by hand (KNOWN_CEIL_DIVS: others' files)."""
    files = app_files("paged", "lessons", "viz", "ui")
    found = {str(p.relative_to(ROOT)): block_ceil_divs(p.read_text(encoding="utf-8")) for p in files
             if p != ROOT / "paged" / "addressing.py"}
    over = {k: v for k, v in found.items() if len(v) > KNOWN_CEIL_DIVS.get(k, 0)}
    assert not over, f"use paged.addressing.blocks_needed: {over}"


def test_the_block_count_checker_sees_a_hand_count():
    src = ("a = -(-n // block_size)\nb = (n + self.block_size - 1) // self.block_size\nc = -(-n // cols)\n"
           "d = n // bs\ne = (n + bs - 1) // bs\n")
    assert block_ceil_divs(src) == [1, 2, 5]


# --- tests share helpers through helper modules, never through conftest.py or another test file ------------------
# Files other engineers own, to be moved to a helper module by them (tests/app/app_util.py, tests/helpers.py).
KNOWN_TEST_IMPORTS: set[str] = set()  # test files still importing another test file: none left


def imports_test_modules(source: str) -> list[str]:
    """Modules a file imports that are a conftest or a test_ file (code in strings, run elsewhere, is not seen)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [n for n in names if n.split(".")[-1] == "conftest" or n.split(".")[-1].startswith("test_")]


def test_tests_share_helpers_through_helper_modules():
    found = {str(p.relative_to(ROOT)): imports_test_modules(p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "tests").rglob("*.py"))}
    assert not {k: v for k, v in found.items() if v and k not in KNOWN_TEST_IMPORTS}


def test_the_test_import_checker_sees_conftest_and_test_files():
    src = "from .conftest import app_test\nfrom test_kernels import build\nimport helpers\nfrom .app_util import x\n"
    assert imports_test_modules(src) == ["conftest", "test_kernels"]


# --- tests marked by chapter: `pytest tests/paged -m article` runs the article's tests -------------------------------
CHAPTER_MARKERS = {"article", "chapters", "engine", "kernels", "faults", "model", "cli", "benchmarks",
                   "exercises"}
MARKED_TREES = ("tests/paged", "tests/benchmarks")  # a subfolder's files carry its name: tests/paged/engine -> engine


def file_markers(source: str) -> set[str]:
    """The marker names of a module-level `pytestmark = pytest.mark.x` (or a list / tuple of them)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            names |= {m.attr for m in marks if isinstance(m, ast.Attribute)
                      and ast.unparse(m.value) == "pytest.mark"}
    return names


def test_every_library_test_file_carries_its_chapter_marker(pytestconfig):
    """Every test file under tests/paged/ and tests/benchmarks/ has a registered chapter marker, its folder's own
    when it sits in one (tests/paged/engine/ -> engine); root files of tests/paged/ any chapter's."""
    registered = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    assert CHAPTER_MARKERS <= registered, "register every chapter marker in pyproject.toml"
    wrong = {}
    for tree in MARKED_TREES:
        for p in sorted((ROOT / tree).rglob("test_*.py")):
            rel = p.relative_to(ROOT)
            folder = rel.parts[-2]
            want = CHAPTER_MARKERS if folder == "paged" else {folder}
            found = file_markers(p.read_text(encoding="utf-8"))
            if not found & want or not found <= registered:
                wrong[str(rel)] = sorted(found)
    assert not wrong, f"pytestmark = pytest.mark.<chapter> after the imports: {wrong}"


def test_the_marker_checker_reads_pytestmark():
    src = ("import pytest\npytestmark = [pytest.mark.kernels, pytest.mark.engine]\nx = pytest.mark.slow\n"
           "def test_a():\n    pytestmark = pytest.mark.cli\n")
    assert file_markers(src) == {"kernels", "engine"}
    assert file_markers("import pytest\npytestmark = pytest.mark.article\n") == {"article"}
    assert file_markers("import pytest\n\ndef test_a():\n    pass\n") == set()


# --- one causal mask: paged.attention.causal_mask --------------------------------------------------------------------
ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _calls(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` holds a call to a function (or method) named in `names`."""
    return any(isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) in names
               for n in ast.walk(node))


def hand_causal_masks(source: str) -> list[int]:
    """Line numbers of position masks spelled out: an ordering with an arange on both sides (`arange(ctx) <=
    arange(q)[:, None] + offset` and the like), or a tril / triu. A validity mask (`arange(n) < lens[:, None]`) has
    one arange only and is not counted."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, ORDERINGS) for op in node.ops):
            sides = [node.left, *node.comparators]
            if sum(_calls(side, {"arange"}) for side in sides) >= 2:
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None)
                                             or getattr(node.func, "id", None)) in {"tril", "triu"}:
            lines.append(node.lineno)
    return sorted(lines)


def test_the_causal_mask_is_built_in_one_place():
    """Above tests/ the only hand-built causal mask is paged.attention.causal_mask (one definition per fact: the
    reference and the fast path share it). Tests may spell one out: an independent reference is their job."""
    files = app_files("paged", "lessons", "viz", "ui")
    found = {str(p.relative_to(ROOT)): hand_causal_masks(p.read_text(encoding="utf-8")) for p in files}
    assert {k: v for k, v in found.items() if v} == {"paged/attention.py": found["paged/attention.py"]}
    assert len(found["paged/attention.py"]) == 1, "paged/attention.py builds the causal mask once (causal_mask)"


def test_the_causal_mask_checker_sees_a_hand_mask():
    src = ("m = torch.arange(ctx)[None, :] <= torch.arange(n)[:, None] + (ctx - n)\n"
           "v = torch.arange(n)[None, :] < lens[:, None]\n"
           "w = torch.ones(n, n).tril().bool()\n"
           "x = arange(n)[:, None] >= arange(n)\n")
    assert hand_causal_masks(src) == [1, 3, 4]


# --- the app's engines record every step: LLMEngine(record=False) is for benchmarks ----------------------------------
def lean_engines(source: str) -> list[int]:
    """Line numbers of calls passing record= anything but a literal True (a page replays each step's per-sequence
    states and tables: a lean engine would draw empty steps without an error)."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == "record" and not (isinstance(kw.value, ast.Constant)
                                                                   and kw.value.value is True)]


def test_nothing_above_paged_builds_a_lean_engine():
    files = app_files("ui", "viz", "lessons")
    found = {str(p.relative_to(ROOT)): lean_engines(p.read_text(encoding="utf-8")) for p in files}
    assert not {k: v for k, v in found.items() if v}


def test_the_lean_engine_checker_sees_record_false():
    src = "a = LLMEngine(m, t, record=False)\nb = LLMEngine(m, t, record=True)\nc = LLMEngine(m, t, record=lean)\n"
    assert lean_engines(src) == [1, 3]


# --- the article's five files: a reader finishes them (issue 37) -------------------------------------------------
ARTICLE_FILES = ("addressing.py", "kv_cache.py", "block_manager.py", "sequence.py", "attention.py")
# Issue 37 asks for <= 800 lines together: batch table validation and the helper checks live in paged/checks.py,
# paged/address_checks.py and paged/attention_checks.py, called from the five. Never raised.
ARTICLE_MAX_LINES = 800


def long_lines(source: str, width: int = 100) -> list[int]:
    """Line numbers of lines wider than `width` columns."""
    return [i for i, line in enumerate(source.splitlines(), 1) if len(line) > width]


def test_the_article_files_stay_short_and_narrow():
    """The five article files: no line past 100 columns, and ARTICLE_MAX_LINES lines at most together."""
    sources = {name: (ROOT / "paged" / name).read_text(encoding="utf-8") for name in ARTICLE_FILES}
    assert {name: long_lines(src) for name, src in sources.items() if long_lines(src)} == {}
    assert sum(len(src.splitlines()) for src in sources.values()) <= ARTICLE_MAX_LINES


def test_every_library_line_is_at_most_100_columns():
    """Lines <= 100 columns everywhere in paged/ (issue 37), not only in the article's five files."""
    wide = {str(p.relative_to(ROOT)): long_lines(p.read_text(encoding="utf-8"))
            for p in sorted((ROOT / "paged").rglob("*.py"))}
    assert {name: lines for name, lines in wide.items() if lines} == {}


def test_the_line_checker_sees_a_long_line():
    assert long_lines("x = 1\n" + "y" * 101 + "\n" + "z" * 100 + "\n") == [2]


def test_the_reading_order_names_every_root_module_and_folder():
    """paged/__init__.py's docstring is the reading order (issue 37): the five first, in the article's
    order, then every other root module and every folder."""
    import paged

    doc = paged.__doc__
    names = [p.name for p in (ROOT / "paged").iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py")
             or (p.is_dir() and (p / "__init__.py").exists())]
    missing = [n for n in names if (n if n.endswith(".py") else n + "/") not in doc]
    assert missing == []
    five = ["addressing.py", "kv_cache.py", "attention.py", "block_manager.py", "sequence.py"]
    assert [doc.index(n) for n in five] == sorted(doc.index(n) for n in five)
    assert max(doc.index(n) for n in five) < min(doc.index(n) for n in names if n not in five)
