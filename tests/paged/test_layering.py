"""The article's layering holds: address arithmetic (`// block_size`, `% block_size`, `* block_size +`) appears in
paged/addressing.py only, never in paged/engine/, paged/faults/ or paged/kernels/, which call its functions; and no module of
paged/ imports itself back through another (no import circle, function-level imports included)."""

import re
from pathlib import Path

import pytest

from helpers import import_circles, import_edges

pytestmark = pytest.mark.article

ROOT = Path(__file__).resolve().parents[2]
ARITHMETIC = re.compile(r"(//|%)\s*(\w+\.)*\w*block_size\b|\*\s*(\w+\.)*\w*block_size\s*\+")


def address_arithmetic(source: str) -> list[int]:
    """Line numbers where a slot or a block index is computed by hand from a block size."""
    return [i for i, line in enumerate(source.splitlines(), 1) if ARITHMETIC.search(line.split("#")[0])]


def test_no_address_arithmetic_outside_addressing():
    """paged/engine/, paged/faults/ and paged/kernels/ compute no slot, logical block or offset by hand."""
    found = {str(p.relative_to(ROOT)): address_arithmetic(p.read_text(encoding="utf-8"))
             for sub in ("engine", "faults", "kernels") for p in sorted((ROOT / "paged" / sub).rglob("*.py"))}
    assert not {k: v for k, v in found.items() if v}, "use paged.addressing (slot_mapping, logical_address, ...)"


def test_the_arithmetic_checker_sees_hand_addressing():
    src = ("a = table[i // block_size] * block_size + i % block_size\nb = n % self.block_size\n"
           "c = blocks_needed(n, block_size)\nd = x // 2  # // block_size in a comment\n")
    assert address_arithmetic(src) == [1, 2]


def test_paged_has_no_import_circle():
    """No module of paged/ reaches itself through its imports: the article's files import their kernels, never
    the reverse; each benchmark module imports the ones it builds on only."""
    assert import_circles(import_edges(ROOT / "paged")) == []


def test_the_circle_finder_sees_a_circle(tmp_path):
    pkg = tmp_path / "paged"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "attention.py").write_text("def f():\n    from .kernels import fused\n")
    (pkg / "kernels" / "__init__.py").write_text("")
    (pkg / "kernels" / "fused.py").write_text("from ..attention import f\n")
    (pkg / "addressing.py").write_text("import torch\n")
    assert import_circles(import_edges(pkg)) == [["paged.attention", "paged.kernels.fused"]]
