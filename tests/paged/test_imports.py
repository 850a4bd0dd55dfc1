"""Calls run one way inside paged/ (issue 37): no module imports another module's `_private` name,
and the module-level imports (what runs when `import paged...` loads a file, `if TYPE_CHECKING:`
aside) form no circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import import_circles, import_edges

pytestmark = pytest.mark.article

ROOT = Path(__file__).resolve().parents[2]
KNOWN_PRIVATE_IMPORTS: dict[str, list[str]] = {}  # none: every private name stays in its module
# The library's core: the article's files, what they need, their kernels. None loads a chapter, the
# engine or the faults (config.py loaded swap.py's check_swap).
CORE = {"paged", "paged.address_checks", "paged.addressing", "paged.attention",
        "paged.attention_checks", "paged.batch", "paged.block_manager", "paged.checks", "paged.config",
        "paged.kv_cache", "paged.prefix_cache", "paged.sequence"}


def private_imports(source: str) -> list[str]:
    """`module.name` for every `from module import _name` (a dunder such as __version__ aside)."""
    return [f"{'.' * node.level}{node.module or ''}.{alias.name}"
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_of_paged_imports_a_private_name():
    """A private name stays in its module: native_step's four names of native.py, the engine's _free
    and _stop_reason, the runner's _contiguous_cache were the ones issue 37 found."""
    found = {str(p.relative_to(ROOT)): private_imports(p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "paged").rglob("*.py"))}
    assert not {k: v for k, v in found.items() if v and v != KNOWN_PRIVATE_IMPORTS.get(k)}


def test_the_private_import_checker_sees_one():
    src = "from .native import _POINTERS, native_decode\nfrom __future__ import annotations\nimport _thread\n"
    assert private_imports(src) == [".native._POINTERS"]


def test_paged_loads_without_an_import_circle():
    """config.py no longer loads a chapter (swap.py's check_swap), the faults no longer reach into
    the runner (BatchInput is paged/batch.py's), paged.kernels has no registry that native and the
    package share."""
    assert import_circles(import_edges(ROOT / "paged", load_time_only=True)) == []


def test_the_core_loads_no_chapter_engine_or_fault():
    """A module of CORE or paged/kernels/ loads only modules of CORE or paged/kernels/."""
    edges = import_edges(ROOT / "paged", load_time_only=True)
    core = {m for m in edges if m in CORE or m.startswith("paged.kernels")}
    assert {m: sorted(edges[m] - core) for m in core if edges[m] - core} == {}


def test_the_load_circle_finder_sees_one_and_skips_type_checking(tmp_path):
    pkg = tmp_path / "paged"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text("from .swap import check_swap\n")
    (pkg / "swap.py").write_text("try:\n    from .config import MAX\nexcept ImportError:\n    pass\n")
    (pkg / "engine" / "__init__.py").write_text("from .runner import run\n")
    (pkg / "engine" / "runner.py").write_text("from ..faults import hook\n")
    (pkg / "faults.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from .engine.runner import BatchInput\ndef f():\n    from .engine import x\n")
    assert import_circles(import_edges(pkg, load_time_only=True)) == [["paged.config", "paged.swap"]]
