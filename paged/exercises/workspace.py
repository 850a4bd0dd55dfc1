"""The learner's workspace: written from the reference solution (stubs cut from it), read back by
file path.

A stub keeps each function's signature and docstring; an exercise's body becomes its pseudo-code
(the solution's `# >` lines) and `raise NotImplementedError`. Functions without `# >` lines are
given whole.

"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SOLUTION = Path(__file__).resolve().parent / "solution"
README = Path(__file__).resolve().parent / "readme"
FILES = ("addressing.py", "kv_cache.py", "attention.py", "block_manager.py", "sequence.py")
MODULES = tuple(f.removesuffix(".py") for f in FILES)
TODO = '    raise NotImplementedError("your turn: see README.md / 轮到你了：见 README.zh.md")'


def stub_source(source: str) -> str:
    """The solution file `source` with every exercise body replaced by its pseudo-code and a raise.
    Raises SyntaxError if source is not Python."""
    lines = source.splitlines()
    cuts = []  # (the line after the docstring, the body's last line), 0-based, inclusive
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        end = node.end_lineno - 1
        first_doc_end = (
            node.body[0].end_lineno if ast.get_docstring(node) is not None else node.lineno
        )
        if any(lines[i].strip().startswith("# >") for i in range(first_doc_end, end + 1)):
            cuts.append((first_doc_end, end))
    for begin, end in sorted(cuts, reverse=True):
        block = lines[begin : end + 1]
        indent = block[0][: len(block[0]) - len(block[0].lstrip())]
        pseudo = [
            ln.replace("# > ", "# ", 1).replace("# >", "#", 1)
            for ln in block
            if ln.strip().startswith("# >")
        ]
        lines[begin : end + 1] = pseudo + [indent + TODO.strip()]
    return "\n".join(lines) + "\n"


def init_workspace(
    directory: str | Path, solution: bool = False, force: bool = False
) -> list[Path]:
    """Write the five files (stubs, or the solution) and README.md / README.zh.md into `directory`.
    Returns the paths written. Raises ValueError if a file exists there already (force=False): a
    learner's work is never overwritten."""
    root = Path(directory)
    names = [*FILES, "README.md", "README.zh.md"]
    existing = [n for n in names if (root / n).exists()]
    if existing and not force:
        raise ValueError(
            f"{root} already holds {existing}: choose an empty folder (nothing was written)"
        )
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for name in FILES:
        text = (SOLUTION / name).read_text(encoding="utf-8")
        (root / name).write_text(text if solution else stub_source(text), encoding="utf-8")
        written.append(root / name)
    for name in ("README.md", "README.zh.md"):
        (root / name).write_text((README / name).read_text(encoding="utf-8"), encoding="utf-8")
        written.append(root / name)
    return written


def load_workspace(directory: str | Path) -> dict[str, ModuleType]:
    """Import the workspace's five files by path, as fresh module objects (edits are picked up),
    under their bare names so they can import each other (`from addressing import locate`). Returns
    name -> module. An error while importing one propagates (the caller reports it as that
    exercise's failure). Raises FileNotFoundError for a missing file."""
    root = Path(directory).resolve()
    for name in MODULES:
        if not (root / f"{name}.py").is_file():
            raise FileNotFoundError(
                f"{root / (name + '.py')} is missing: run `python -m paged exercises init`"
            )
        sys.modules.pop(name, None)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    modules = {}
    for name in MODULES:  # in dependency order: addressing first
        if name in sys.modules:  # imported already by a sibling (`from addressing import ...`)
            modules[name] = sys.modules[name]
            continue
        spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


def unload_workspace(directory: str | Path) -> None:
    """Undo load_workspace's traces (its bare module names, its sys.path entry): an in-process
    caller (the tests) leaves the interpreter as it found it."""
    root = str(Path(directory).resolve())
    for name in MODULES:
        module = sys.modules.get(name)
        if module is not None and str(getattr(module, "__file__", "")).startswith(root):
            del sys.modules[name]
    while root in sys.path:
        sys.path.remove(root)
