"""The summary half of `python -m benchmarks kernels`: the read-bandwidth probe the "% bw" column divides by, the
aligned table, and the lines under it that name each impl's worst case (the targets of issue #14: no slower than
contiguous SDPA, >= 85% of the read bandwidth). The cases themselves are built and timed in benchmarks/kernels.py.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the dataclasses live with the case runner, which imports this module
    from .kernels import CaseResult, KernelReport

COLD_MB = 64  # --cold: read before every timed call, twice a 32 MiB L3
COLUMNS = ("B", "ctx", "heads", "d", "impl", "ok", "ms", "x sdpa", "x gather", "GB/s", "% bw")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def read_bandwidth_probe(device: torch.device, megabytes: int = 256, reps: int = 5) -> tuple[float, float]:
    """Read bandwidth in GB/s by x.sum() over a `megabytes` float32 tensor (pages touched first): (bytes / median
    time, bytes / fastest time). The fastest rep is the one a busy neighbour disturbed least."""
    x = torch.ones(megabytes * (1 << 20) // 4, device=device)
    x.sum()
    times = []
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        x.sum()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return x.numel() * 4 / statistics.median(times) / 1e9, x.numel() * 4 / min(times) / 1e9


def read_bandwidth_gbps(device: torch.device, megabytes: int = 256, reps: int = 5) -> float:
    """Read bandwidth: bytes / median time of x.sum() over a `megabytes` float32 tensor (see read_bandwidth_probe)."""
    return read_bandwidth_probe(device, megabytes, reps)[0]


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table_rows(cases: list[CaseResult]) -> list[tuple[str, ...]]:
    """One row of strings per (case, impl), in COLUMNS order."""
    rows = []
    for c in cases:
        for r in c.results:
            rows.append((str(c.case.batch), str(c.case.context_len), f"{c.case.num_heads}/{c.case.num_kv_heads}",
                         str(c.case.head_dim), r.impl, "✔" if r.ok else "✗", _fmt(r.ms, ".2f"),
                         _fmt(r.x_sdpa, ".2f"), _fmt(r.x_gather, ".2f"), _fmt(r.gbps, ".1f"),
                         _fmt(r.pct_bw, ".0f")))
    return rows


def format_rows(cases: list[CaseResult], header: bool = True) -> str:
    widths = (3, 5, 5, 4, 7, 2, 9, 7, 8, 7, 5)
    lines = [" ".join(f"{c:>{w}}" for c, w in zip(COLUMNS, widths))] if header else []
    lines += [" ".join(f"{c:>{w}}" for c, w in zip(row, widths)) for row in table_rows(cases)]
    return "\n".join(lines)


def worst_cases(cases: list[CaseResult]) -> list[str]:
    """One line per impl (sdpa aside): its slowest case relative to sdpa and its lowest % of read bandwidth."""
    def name(c: CaseResult) -> str:
        return f"B={c.case.batch} ctx={c.case.context_len} {c.case.num_heads}/{c.case.num_kv_heads} d={c.case.head_dim}"

    lines = []
    impls = dict.fromkeys(r.impl for c in cases for r in c.results if r.impl != "sdpa")
    for impl in impls:
        rows = [(r, c) for c in cases for r in c.results if r.impl == impl and r.ms is not None]
        slow, slow_case = max(rows, key=lambda rc: rc[0].x_sdpa)
        low, low_case = min(rows, key=lambda rc: rc[0].pct_bw)
        lines.append(f"{impl}: slowest {slow.x_sdpa:.2f}x sdpa ({name(slow_case)}); lowest {low.pct_bw:.0f}% of read "
                     f"bandwidth ({name(low_case)}); {sum(r.x_sdpa <= 1 for r, _ in rows)}/{len(rows)} cases no "
                     f"slower than sdpa, {sum(r.pct_bw >= 85 for r, _ in rows)}/{len(rows)} at >= 85%")
        best = [(r, c) for r, c in rows if r.x_sdpa_best is not None]
        if best:  # on a busy machine the medians carry the neighbours' load; the fastest reps much less of it
            slow, slow_case = max(best, key=lambda rc: rc[0].x_sdpa_best)
            line = (f"{impl}, fastest reps: slowest {slow.x_sdpa_best:.2f}x sdpa ({name(slow_case)}); "
                    f"{sum(r.x_sdpa_best <= 1 for r, _ in best)}/{len(best)} cases no slower than sdpa")
            pct = [(r, c) for r, c in best if r.pct_bw_best is not None]
            if pct:  # the fastest rep against the probe's fastest rep, on the same case
                low, low_case = min(pct, key=lambda rc: rc[0].pct_bw_best)
                line += (f"; lowest {low.pct_bw_best:.0f}% of read bandwidth ({name(low_case)}); "
                         f"{sum(r.pct_bw_best >= 85 for r, _ in pct)}/{len(pct)} at >= 85%")
            lines.append(line)
    return lines


def format_report(report: KernelReport) -> str:
    """The aligned table under a header about the machine (and a warning when its cores were oversubscribed)."""
    head = (f"device {report.device}, {report.threads} threads, read bandwidth {report.read_bw_gbps:.1f} GB/s "
            f"(x.sum()); fp32, block_size 16, shuffled block tables; ms = median")
    if report.cold:
        head += f"; cold caches ({COLD_MB} MB read before every timed call)"
    probes = [c.read_bw_gbps for c in report.cases if c.read_bw_gbps]
    if probes:
        head += f"\n% bw relative to a probe before each case: {min(probes):.1f}-{max(probes):.1f} GB/s"

    if report.load_avg is not None:
        head += f"\nload average {report.load_avg:.1f}, OMP_WAIT_POLICY {report.omp_wait_policy or 'unset'}"
        cores = os.cpu_count() or 1
        if report.device == "cpu" and report.threads > 1 and report.load_avg > cores and not report.omp_wait_policy:
            head += (f"\nwarning: load {report.load_avg:.1f} > {cores} cores: spinning OpenMP threads inflate impls "
                     "that run many ops (fused, loop); rerun with OMP_WAIT_POLICY=passive or --threads 1")
    return "\n".join([head, format_rows(report.cases), *worst_cases(report.cases)])
