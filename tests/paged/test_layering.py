"""The article's layering holds: address arithmetic (`// block_size`, `% block_size`, `* block_size +`) appears in
paged/addressing.py only, never in paged/engine/, paged/faults/ or paged/kernels/, which call its functions; and no module of
paged/ imports itself back through another (no import circle, function-level imports included)."""

import ast
import re
from pathlib import Path

import pytest

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


def import_edges(root: Path, package: str = "paged") -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (any import statement outside `if TYPE_CHECKING:`, a
    submodule's import of its own parent packages aside)."""
    mods = {}
    for p in root.rglob("*.py"):
        name = ".".join(p.relative_to(root.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = p
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for b in node.body for n in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods] or [target]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                for i in range(2, len(parts) + 1):
                    t = ".".join(parts[:i])
                    if t in mods and t != mod and not mod.startswith(t + "."):
                        edges[mod].add(t)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another (strongly connected components of two or more)."""
    out, seen = [], set()
    for start in edges:
        if start in seen:
            continue
        reach = {start}
        todo = [start]
        while todo:
            for w in edges[todo.pop()]:
                if w not in reach:
                    reach.add(w)
                    todo.append(w)
        group = sorted(m for m in reach if start in _reach(edges, m))
        seen.update(group)
        if len(group) > 1:
            out.append(group)
    return out


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    reach, todo = {start}, [start]
    while todo:
        for w in edges[todo.pop()]:
            if w not in reach:
                reach.add(w)
                todo.append(w)
    return reach


def test_paged_has_no_import_circle():
    """No module of paged/ reaches itself through its imports: the article's files import their kernels, never
    the reverse; each benchmark module imports the ones it builds on only."""
    assert circles(import_edges(ROOT / "paged")) == []


def test_the_circle_finder_sees_a_circle(tmp_path):
    pkg = tmp_path / "paged"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "attention.py").write_text("def f():\n    from .kernels import fused\n")
    (pkg / "kernels" / "__init__.py").write_text("")
    (pkg / "kernels" / "fused.py").write_text("from ..attention import f\n")
    (pkg / "addressing.py").write_text("import torch\n")
    assert circles(import_edges(pkg)) == [["paged.attention", "paged.kernels.fused"]]
