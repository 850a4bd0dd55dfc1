"""`python -m benchmarks <subcommand> [...]`: the benchmarks, one subcommand each.

    kernels   decode attention: loop / gather / fused / triton vs contiguous SDPA, same data, one run
    memory    KV memory reserved vs needed: contiguous reservation vs paged, per block size
    engine    paged vs contiguous engine throughput (benchmarks/engine.py)
    swap      preempting one sequence: swap out + in vs recompute, per block size (the paper's Fig. 19)
    external  outside paged kernels (flash-attn, FlashInfer, flex_attention) on our pool, CUDA only

This folder sits beside the library, outside it (as vLLM's benchmarks/ does): it imports paged/, and paged/ never
imports it (`python -m paged bench ...` forwards here in a child process). The app's own benchmarks (server time per
click) need streamlit, which neither imports: they live with the app, as `python -m ui.bench`.

Adding one: put `main(argv: list[str]) -> int` in a module and add "name": "module:function" to SUBCOMMANDS.
Modules are imported only when their subcommand runs, so a missing optional one breaks nothing else.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, str] = {
    "kernels": "benchmarks.kernels:main",
    "memory": "benchmarks.memory_cli:main",
    "engine": "benchmarks.engine:main",
    "external": "benchmarks.external:main",
    "swap": "benchmarks.swap:main",
}
MOVED = {"app": "python -m ui.bench"}  # old subcommands that now live above paged/


def resolve(name: str):
    """The main function behind subcommand `name`; raises ValueError if it is unknown or cannot be imported."""
    if name in MOVED:
        raise ValueError(f"bench subcommand {name!r} moved to the app's floor: run `{MOVED[name]}`")
    if name not in SUBCOMMANDS:
        raise ValueError(f"unknown bench subcommand {name!r}; choose one of {sorted(SUBCOMMANDS)}")
    module_name, func_name = SUBCOMMANDS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):  # the subcommand's own module is missing
            raise ValueError(f"bench subcommand {name!r} is not available: {module_name} is not installed") from None
        raise
    return getattr(module, func_name)


def main(argv: list[str] | None = None) -> int:
    """Dispatch `argv[0]` to its subcommand with the remaining arguments; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        func = resolve(argv[0])
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return int(func(argv[1:]) or 0)
