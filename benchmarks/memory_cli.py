"""`python -m benchmarks memory [--json]`: KV memory reserved vs needed on a seeded trace (paged.chapters.memory)."""

from __future__ import annotations

import argparse
import json

from paged.chapters.memory import BLOCK_SIZES, TraceSpec, format_memory_report, simulate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks memory", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--budget", type=int, default=65536, help="KV budget in token slots for the 'fit' column")
    args = p.parse_args(argv)
    try:
        spec = TraceSpec(num_requests=args.requests, seed=args.seed, max_model_len=args.max_model_len)
    except ValueError as err:
        p.error(str(err))
    report = simulate(spec, BLOCK_SIZES, args.budget)
    print(json.dumps(report.to_dict(), indent=1) if args.json else format_memory_report(report))
    return 0
