"""`scripts/gpu_check.sh OUT_DIR [--device cuda|cpu] [--quick]`: all worth checking on a CUDA machine, in one call.

Sections (each timed, the JSON rewritten after each, so a run cut short still leaves what it found):
  versions  torch, triton, CUDA, the GPU's name, threads
  parity    every decode impl that applies, fp32/fp16/bf16, block sizes 1-256, vs the float64 contiguous reference
  engine    twin engines paged == contiguous, the no-cache causal forward, a negative control, prefix caching
  kernels   `bench kernels` on the device, plus the device's copy bandwidth (y.copy_(x), bytes read + written)
  bench     `bench engine` on the device (and, on a GPU, on the CPU too, for the batch-32 comparison)

Writes OUT_DIR/gpu_check.json and OUT_DIR/gpu_check.txt (the summary, also printed). Exit status 1 when a
correctness check failed; performance targets are reported (met / missed) but never fail the run. Imports only
torch, safetensors and (for impl="triton") triton: no streamlit, plotly, transformers, hypothesis or pytest.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from paged.kv_cache import default_device
from .device_checks import sweep_cases
from .gpu_verdicts import Verdict, format_summary, verdicts
from .kernels import KernelCase, _sync, format_report, run_kernel_bench

SECTIONS = ("parity", "engine", "kernels", "bench")


@dataclass
class Plan:
    """Sizes of one run: `full()` for a GPU (a few minutes), `quick()` for CI on a CPU (seconds)."""

    sweep: list[tuple[str, int, int, int, int]]  # parity cases: dtype, num_heads, num_kv_heads, head_dim, block_size
    longest: int  # the longest context_len of the sweep (the others are set by the block size)
    engine_block_sizes: list[int]
    new_tokens: int
    prefix_block_size: int
    kernel_cases: list[KernelCase]
    kernel_reps: int
    bandwidth_mb: int
    loop_max_tokens: int
    bench_batches: tuple[int, ...]
    bench_tokens: int
    bench_reps: int
    cpu_batches: tuple[int, ...] = (32,)  # the engine bench on the CPU, for the "cuda >= cpu" target

    @staticmethod
    def full() -> "Plan":
        return Plan(sweep=sweep_cases(["float32", "float16", "bfloat16"], [1, 2, 3, 4, 8, 16, 32, 48, 64, 128, 256],
                                      [(8, 2), (8, 8), (8, 1)], [32, 64, 80, 128]), longest=300,
                    engine_block_sizes=[16, 1, 128], new_tokens=24, prefix_block_size=16,
                    kernel_cases=[KernelCase(b, n, 8, 8, 128) for b in (16, 32, 64) for n in (2048, 8192)],
                    kernel_reps=5, bandwidth_mb=1024, loop_max_tokens=16 * 1024,
                    bench_batches=(1, 32), bench_tokens=64, bench_reps=2)

    @staticmethod
    def quick() -> "Plan":
        return Plan(sweep=sweep_cases(["float32", "float16", "bfloat16"], [1, 3, 16], [(4, 2), (4, 4)], [32, 80]),
                    longest=20, engine_block_sizes=[4], new_tokens=8, prefix_block_size=4,
                    kernel_cases=[KernelCase(2, 64, 4, 2, 16)], kernel_reps=1, bandwidth_mb=8, loop_max_tokens=512,
                    bench_batches=(2,), bench_tokens=4, bench_reps=1)


@dataclass
class Report:
    device: str
    quick: bool
    versions: dict = field(default_factory=dict)
    sections: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)  # what was not run -> why
    errors: dict = field(default_factory=dict)  # section -> the exception that stopped it (the others still run)
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(v.kind == "check" and v.status == "fail" for v in self.verdicts)

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def versions(device: torch.device) -> dict:
    """What this machine runs: python, torch, triton, CUDA, the GPU (None where absent)."""
    info = dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
                cuda_available=torch.cuda.is_available(), device=str(device), threads=torch.get_num_threads(),
                triton=None, gpu=None, gpu_capability=None)
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
    return info


def copy_bandwidth_gbps(device: torch.device, megabytes: int, reps: int = 5) -> float:
    """Device copy bandwidth: bytes read + written by y.copy_(x) over a `megabytes` tensor / median time, GB/s."""
    x = torch.ones(megabytes * (1 << 20) // 4, device=device)
    y = torch.empty_like(x)
    y.copy_(x)  # touch every page first
    times = []
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        y.copy_(x)
        _sync(device)
        times.append(time.perf_counter() - t0)
    return 2 * x.numel() * 4 / statistics.median(times) / 1e9


def run_sections(device: torch.device, plan: Plan, sections: list[str], report: Report, save) -> None:
    """Run each requested section in turn, recording its result (or the exception that stopped it) and its time;
    `save()` after each one."""
    from .device_checks import impls_for

    impls, skipped = impls_for(device)
    report.skipped.update({f"impl {k}": v for k, v in skipped.items()})
    for name in sections:
        t0 = time.perf_counter()
        try:
            _run_section(name, device, plan, impls, report)
        except Exception as err:  # noqa: BLE001 — one broken section must not cost the others on a lent GPU
            traceback.print_exc()
            report.errors[name] = f"{type(err).__name__}: {err}"
        report.seconds[name] = round(time.perf_counter() - t0, 2)
        save()


def _run_section(name: str, device: torch.device, plan: Plan, impls: list[str], report: Report) -> None:
    """Run one section and store its result in report.sections[name] (what it skips, in report.skipped)."""
    from . import device_checks as dc

    if name == "parity":
        report.sections["parity"] = dc.parity_sweep(device, impls, plan.sweep, plan.longest)
    elif name == "engine":
        from paged.model import load_model

        model, tokenizer = load_model(device=device)
        slow = {"loop": "one Python step per token: covered by the parity sweep"}
        if device.type == "cpu":
            slow["triton"] = "Triton's CPU interpreter is too slow for a model: covered by the parity sweep"
        report.skipped.update({f"engine twins with impl {i}": slow[i] for i in impls if i in slow})
        report.sections["engine"] = dc.engine_checks(model, tokenizer, [i for i in impls if i not in slow],
                                                     plan.engine_block_sizes, plan.new_tokens,
                                                     plan.prefix_block_size)
    elif name == "kernels":
        copy_bw = copy_bandwidth_gbps(device, plan.bandwidth_mb)
        if any(c.batch * c.context_len > plan.loop_max_tokens for c in plan.kernel_cases):
            report.skipped["bench kernels impl loop, big cases"] = (f"B * context_len > {plan.loop_max_tokens}: "
                                                                    "one Python step per token")
        kernel_report = run_kernel_bench(plan.kernel_cases, None, str(device), reps=plan.kernel_reps,
                                         bandwidth_mb=plan.bandwidth_mb, loop_max_tokens=plan.loop_max_tokens)
        bench = kernel_report.to_dict()
        for case in bench["cases"]:
            for r in case["results"]:
                r["pct_copy_bw"] = 100 * r["gbps"] / copy_bw
        report.sections["kernels"] = dict(copy_bw_gbps=copy_bw, bench=bench, table=format_report(kernel_report))
    elif name == "bench":
        report.sections["bench"] = engine_bench(device, plan, report)


def engine_bench(device: torch.device, plan: Plan, report: Report) -> dict:
    """`bench engine` rows on the device; on a GPU also on the CPU (1 thread, as `bench engine` defaults to)."""
    from .engine import bench_engine

    out = dict(device=bench_engine(plan.bench_batches, plan.bench_tokens, 16, plan.bench_reps, device=device))
    if device.type == "cpu":
        report.skipped["engine bench on the CPU for comparison"] = "the device is the CPU"
        return out
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out["cpu"] = bench_engine(plan.cpu_batches, plan.bench_tokens, 16, plan.bench_reps, device="cpu")
    finally:
        torch.set_num_threads(threads)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/gpu_check.sh", description=__doc__.split("\n")[0])
    p.add_argument("out_dir", help="folder for gpu_check.json and gpu_check.txt (created if needed)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    p.add_argument("--quick", action="store_true", help="tiny sizes (CI on a CPU): seconds, not minutes")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from {','.join(SECTIONS)}")
    args = p.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    if bad := [s for s in sections if s not in SECTIONS]:
        p.error(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error(f"--device cuda: torch {torch.__version__} sees no CUDA device here (CUDA build: "
                f"{torch.version.cuda or 'none'})")
    device = torch.device(args.device) if args.device else default_device()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = Plan.quick() if args.quick else Plan.full()
    report = Report(str(device), args.quick, versions(device))
    print(f"gpu_check on {device}: " + ", ".join(f"{k} {v}" for k, v in report.versions.items()), flush=True)
    for name in SECTIONS:
        if name not in sections:
            report.skipped[f"section {name}"] = "not asked for (--sections)"

    def save() -> None:
        report.verdicts = verdicts(report)
        (out_dir / "gpu_check.json").write_text(json.dumps(report.to_dict(), indent=1) + "\n")
        print(f"... {list(report.seconds)[-1] if report.seconds else 'start'} done "
              f"({sum(report.seconds.values()):.0f} s so far)", file=sys.stderr, flush=True)

    save()
    run_sections(device, plan, sections, report, save)
    summary = format_summary(report)
    (out_dir / "gpu_check.txt").write_text(summary + "\n")
    print(summary)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
