"""`python -m benchmarks kernels [--json] [--quick] [--cold]`: the decode-attention ladder, same data, one run.

For each case (batch B, context_len, num_heads / num_kv_heads, head_dim; fp32; block_size 16; shuffled block
tables) random K/V are written into a paged pool through slot_mapping + write_kv, and the same K/V are kept in a
contiguous [B, num_kv_heads, context_len, head_dim] tensor. Then, in one process:

- every impl's output is checked against `contiguous_attention_decode` (the reference) before it is timed;
- "sdpa" is `F.scaled_dot_product_attention(enable_gqa=True)` on the contiguous copy: the ceiling to compare to;
- impls are timed interleaved (rep 1 of each, rep 2 of each, ...) so machine noise hits them alike; medians,
  of --reps reps at least and more until each impl's timed calls add up to --min-ms (a 50 us call: hundreds);
  each timed call right after an untimed call of the same impl, so none is timed on what another left in cache;
- KV GB/s = bytes of K and V the attention must read (sum of context_lens * num_kv_heads * head_dim * 2 * itemsize)
  / time, and % of this machine's read bandwidth measured in the same run (x.sum() over a >= 256 MB tensor), timed
  between each case's reps (once per rep of the first --reps), so that a neighbour's load that comes and goes
  shifts both alike;
- --cold reads COLD_MB before every timed call instead, so each impl starts from clean, cold caches (otherwise a
  small case is served from cache), and tells native's prefetch rule so (native.caches_flushed);
- under the table, per impl: its slowest case against sdpa and its lowest % of read bandwidth (the targets), and
  both again from the fastest reps (each impl's against sdpa's, and against the probe's fastest rep): on a busy
  machine the medians carry the neighbours' load, the fastest reps much less of it.

"loop" (one Python step per token) runs only where B * context_len <= 16k (--quick: 512); "native" (the C kernel)
only on a CPU with a C compiler; "triton" only on a CUDA GPU with the triton package.

Shared machines: when the cores are busy with other work (load average above the core count, printed in the
header), OpenMP's spinning worker threads make impls that run many small ops (loop, fused) look 5-20x slower than
they are, while one-op SDPA barely notices. `OMP_WAIT_POLICY=passive` in the environment, or `--threads 1`, shows
the kernels rather than the scheduler; compare ratios within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from paged.addressing import blocks_needed, slot_mapping
from paged.attention import contiguous_attention_decode, paged_attention_decode
from paged.kernels.native import caches_flushed
from paged.kernels.kv_fast import pool_zeros
from paged.kv_cache import default_device, write_kv
from .kernel_report import (COLD_MB, COLUMNS, _sync, format_report, format_rows, read_bandwidth_gbps,  # noqa: F401
                            read_bandwidth_probe, table_rows, worst_cases)

FULL_GRID = dict(batch=(1, 16, 64), context_len=(512, 2048), num_kv_heads=(8, 2), head_dim=(64, 128))
QUICK_GRID = dict(batch=(1, 16), context_len=(512,), num_kv_heads=(8, 2), head_dim=(64,))
BANDWIDTH_MB = 256  # size of the x.sum() tensor that measures read bandwidth
LOOP_MAX_TOKENS = 16 * 1024  # B * context_len above which the per-token loop is skipped (7-11 us per token)
QUICK_LOOP_MAX_TOKENS = 512  # --quick: the loop only on the B=1 cases
MIN_TIMED_MS = 300.0  # --min-ms's default: timed calls per impl and case (short calls get more reps for it)
MAX_REPS = 401  # ... but never more reps than this


@dataclass(frozen=True)
class KernelCase:
    """One point of the grid."""

    batch: int
    context_len: int
    num_heads: int = 8
    num_kv_heads: int = 8
    head_dim: int = 64
    block_size: int = 16
    dtype: str = "float32"


@dataclass
class ImplResult:
    """One impl on one case: correctness first, then the median time and what it means."""

    impl: str
    ok: bool
    rel_err: float
    ms: float | None = None
    x_sdpa: float | None = None
    x_gather: float | None = None
    gbps: float | None = None
    pct_bw: float | None = None
    ms_best: float | None = None  # the fastest rep: what the code can do when no neighbour takes the cores
    x_sdpa_best: float | None = None  # ms_best / sdpa's ms_best
    pct_bw_best: float | None = None  # GB/s of ms_best, in % of the probe's fastest rep (read_bw_best_gbps)


@dataclass
class CaseResult:
    case: KernelCase
    kv_bytes: int  # K and V bytes one decode call must read
    results: list[ImplResult] = field(default_factory=list)
    read_bw_gbps: float | None = None  # the x.sum() probe timed between this case's reps: its % bw is relative to it
    read_bw_best_gbps: float | None = None  # that probe's fastest rep, which pct_bw_best is relative to


@dataclass
class KernelReport:
    device: str
    threads: int
    read_bw_gbps: float
    cases: list[CaseResult]
    load_avg: float | None = None  # 1-minute load average at the start: > cores means shared, noisy timings
    omp_wait_policy: str | None = None  # OMP_WAIT_POLICY as set in the environment (None: the runtime's default)
    cold: bool = False  # COLD_MB read before every timed call (see bench_case)

    def to_dict(self) -> dict:
        return asdict(self)


def cases_from_grid(grid: dict) -> list[KernelCase]:
    """Every combination of the grid's batch, context_len, num_kv_heads, head_dim (num_heads 8)."""
    return [KernelCase(b, n, 8, kv, d) for b in grid["batch"] for n in grid["context_len"]
            for kv in grid["num_kv_heads"] for d in grid["head_dim"]]


def make_case_data(case: KernelCase, device: torch.device, seed: int = 0) -> dict:
    """Random query and K/V for `case`: the K/V written into a shuffled paged pool, and kept contiguous.

    Returns query [B, num_heads, head_dim], key_cache/value_cache [num_blocks, block_size, num_kv_heads, head_dim],
    block_tables int32 [B, blocks_per_seq], context_lens int64 [B], keys/values [B, num_kv_heads, ctx, head_dim].
    """
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    b, n, bs = case.batch, case.context_len, case.block_size
    per_seq = blocks_needed(n, bs)
    shape = (b, n, case.num_kv_heads, case.head_dim)
    keys = torch.randn(shape, generator=gen, dtype=dtype)
    values = torch.randn(shape, generator=gen, dtype=dtype)
    tables = torch.randperm(b * per_seq, generator=gen).view(b, per_seq)
    pool_shape = (b * per_seq, bs, case.num_kv_heads, case.head_dim)
    key_cache, value_cache = pool_zeros(pool_shape, dtype, device), pool_zeros(pool_shape, dtype, device)
    for i in range(b):
        slots = slot_mapping(tables[i], 0, n, bs, device=device)
        write_kv(key_cache, value_cache, keys[i].to(device), values[i].to(device), slots)
    return dict(query=torch.randn(b, case.num_heads, case.head_dim, generator=gen, dtype=dtype).to(device),
                key_cache=key_cache, value_cache=value_cache,
                block_tables=tables.to(device=device, dtype=torch.int32),
                context_lens=torch.full((b,), n, dtype=torch.int64, device=device),
                keys=keys.transpose(1, 2).contiguous().to(device),
                values=values.transpose(1, 2).contiguous().to(device))


def _callables(data: dict, impls: list[str]) -> dict:
    q, gqa = data["query"], data["query"].shape[1] != data["key_cache"].shape[2]
    fns = {"sdpa": lambda: F.scaled_dot_product_attention(q.unsqueeze(2), data["keys"], data["values"],
                                                          enable_gqa=gqa).squeeze(2)}
    for impl in impls:
        fns[impl] = (lambda impl=impl: paged_attention_decode(q, data["key_cache"], data["value_cache"],
                                                              data["block_tables"], data["context_lens"],
                                                              impl=impl, validate=False))
    return fns


def _time_interleaved(fns: dict, reps: int, warmup: int, device: torch.device,
                      best: dict[str, float] | None = None, settle=None,
                      after_itself: bool = False, min_ms: float = 0.0, probe=None,
                      probe_ms: list[float] | None = None) -> dict[str, float]:
    """Median ms per callable; each rep runs every callable once, in turn. `best`, when given, receives each
    callable's fastest rep; `settle`, when given, runs untimed before every timed call; after_itself: so does the
    callable itself, so that each timed call starts from the caches its own last call left, not another's.
    min_ms: after `reps` reps, more (up to MAX_REPS) until every callable's timed calls add up to min_ms, so that
    a short call's median rests on hundreds of reps rather than a handful that one burst of a neighbour's load can
    tip (B=1 calls of 40-400 us swung 0.85-1.24x against SDPA from run to run at 9 reps). probe: a callable timed
    after the others in each of the first `reps` reps, its times appended to `probe_ms` (the read-bandwidth probe,
    so that it sees the load the timed calls saw)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    rep = 0
    while rep < reps or (rep < MAX_REPS and min(sum(ts) for ts in times.values()) < min_ms):
        rep += 1
        for name, fn in fns.items():
            if settle is not None:
                settle()
            if after_itself:
                fn()
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times[name].append((time.perf_counter() - t0) * 1e3)
        if probe is not None and rep <= reps:
            _sync(device)
            t0 = time.perf_counter()
            probe()
            _sync(device)
            probe_ms.append((time.perf_counter() - t0) * 1e3)
    if best is not None:
        best.update({name: min(ts) for name, ts in times.items()})
    return {name: statistics.median(ts) for name, ts in times.items()}


def default_impls(device: torch.device) -> list[str]:
    """loop, gather, fused; then native on a CPU that can build it, or triton on a CUDA GPU with triton."""
    from paged.kernels import native_available, triton_available

    kernel, available = ("triton", triton_available) if device.type == "cuda" else ("native", native_available)
    return ["loop", "gather", "fused"] + ([kernel] if available() else [])


def bench_case(case: KernelCase, impls: list[str], device: torch.device, read_bw: float, reps: int = 5,
               warmup: int = 1, tol: float = 1e-4, loop_max_tokens: int = LOOP_MAX_TOKENS,
               cold: bool = False, read_bw_best: float | None = None, min_ms: float = 0.0,
               probe_mb: int = 0) -> CaseResult:
    """Check, then time, every impl (and sdpa) on one case. Warm (the default): each timed call of a fast impl
    follows an untimed call of the same impl, so it finds what it would find called again and again (its own K/V
    in cache), not what the impl before it left: SDPA's enable_gqa path copies K/V to every query head, and the
    next reader first pays to write those dirty lines back (native read B=16, ctx 2048, GQA 8/2, d128 at 62% of
    x.sum()'s bandwidth right after SDPA, 86% right after itself, in one run). cold: read COLD_MB before every timed
    call instead, so each starts with clean, cold caches (as a decode step does in a model whose KV outgrows them).
    min_ms: see _time_interleaved (the fast impls only; the per-token loop keeps its 3 reps at most). probe_mb: time
    x.sum() over that many MB once in each of the first `reps` reps, interleaved with the impls, and take `% bw`
    against it (median and fastest) instead of read_bw / read_bw_best: a probe taken before the case missed the
    load that came during it (per-case probes of one run spread over 10.7-24.5 GB/s)."""
    data = make_case_data(case, device)
    kv_bytes = 2 * case.batch * case.context_len * case.num_kv_heads * case.head_dim * data["keys"].element_size()
    lens = data["context_lens"].tolist()
    ref = contiguous_attention_decode(data["query"], data["keys"].transpose(1, 2), data["values"].transpose(1, 2),
                                      lens).double()
    if case.batch * case.context_len > loop_max_tokens:
        impls = [i for i in impls if i != "loop"]
    fns = _callables(data, impls)
    result = CaseResult(case, kv_bytes, read_bw_gbps=read_bw, read_bw_best_gbps=read_bw_best)
    checked = {}

    def check(group: dict) -> None:
        for name, fn in group.items():
            err = ((fn().double() - ref).abs().max() / ref.abs().max()).item()
            checked[name] = ImplResult(name, ok=err < tol, rel_err=err)

    # The per-token loop leaves thousands of small tensors behind; check and time it only after the fast impls,
    # so its allocations cannot slow their timings.
    slow = {n: f for n, f in fns.items() if n == "loop"}
    fast = {n: f for n, f in fns.items() if n != "loop"}
    check(fast)
    best: dict[str, float] = {}
    flush = torch.ones(COLD_MB * (1 << 20) // 4, device=device) if cold else None

    def flush_caches() -> None:  # and tell native's prefetch rule (else it takes a repeated call for a warm one)
        flush.sum()
        caches_flushed()

    settle = flush_caches if cold else None
    probe_x = torch.ones(probe_mb * (1 << 20) // 4, device=device) if probe_mb else None
    probe_ms: list[float] = []
    ms = _time_interleaved(fast, reps, warmup, device, best, settle, after_itself=not cold, min_ms=min_ms,
                           probe=probe_x.sum if probe_mb else None, probe_ms=probe_ms)
    if probe_ms:
        probe_bytes = probe_x.numel() * 4
        read_bw = result.read_bw_gbps = probe_bytes / (statistics.median(probe_ms) / 1e3) / 1e9
        read_bw_best = result.read_bw_best_gbps = probe_bytes / (min(probe_ms) / 1e3) / 1e9
        del probe_x
    if slow:
        check(slow)
        ms.update(_time_interleaved(slow, min(reps, 3), 0, device, best, settle))
    checked = {name: checked[name] for name in fns}  # report in ladder order
    for name, r in checked.items():
        r.ms, r.ms_best = ms[name], best[name]
        r.x_sdpa_best = best[name] / best["sdpa"]
        r.x_sdpa = ms[name] / ms["sdpa"]
        r.x_gather = ms[name] / ms["gather"] if "gather" in ms else None
        r.gbps = kv_bytes / (ms[name] / 1e3) / 1e9
        r.pct_bw = 100 * r.gbps / read_bw
        if read_bw_best:
            r.pct_bw_best = 100 * kv_bytes / (best[name] / 1e3) / 1e9 / read_bw_best
        result.results.append(r)
    return result


def run_kernel_bench(cases: list[KernelCase], impls: list[str] | None = None, device: str | None = None,
                     reps: int = 5, warmup: int = 1, bandwidth_mb: int = 256, loop_max_tokens: int = LOOP_MAX_TOKENS,
                     log=None, cold: bool = False, min_ms: float = 0.0) -> KernelReport:
    """The whole ladder; `log(text)` (optional) is called after each case; cold and min_ms: see `bench_case`."""
    dev = torch.device(device) if device else default_device()
    impls = default_impls(dev) if impls is None else impls
    read_bw = read_bandwidth_gbps(dev, bandwidth_mb)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    report = KernelReport(str(dev), torch.get_num_threads(), read_bw, [], load, os.environ.get("OMP_WAIT_POLICY"),
                          cold)
    for case in cases:  # each case probes the read bandwidth between its timed reps (bench_case's probe_mb)
        report.cases.append(bench_case(case, impls, dev, read_bw, reps, warmup, loop_max_tokens=loop_max_tokens,
                                       cold=cold, min_ms=min_ms, probe_mb=bandwidth_mb))
        if log:
            log(format_rows([report.cases[-1]], header=len(report.cases) == 1))
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks kernels", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quick", action="store_true", help="a reduced grid (< 30 s): a smoke test")
    p.add_argument("--impls", default=None, help="comma-separated impls (default: all that apply)")
    p.add_argument("--reps", type=int, default=None, help="timed reps per impl (default 5, quick 3)")
    p.add_argument("--min-ms", type=float, default=None,
                   help=f"then more reps (up to {MAX_REPS}) until each impl's timed calls add up to this many ms "
                        f"(default {MIN_TIMED_MS:g}, quick 0): short calls get hundreds of reps")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: leave as is)")
    p.add_argument("--cold", action="store_true", help=f"read {COLD_MB} MB before every timed call: each starts "
                   "with clean, cold caches, as a decode step in a model whose KV outgrows them")
    for name in ("batch", "context_len", "num_kv_heads", "head_dim"):
        p.add_argument(f"--{name.replace('_', '-')}", default=None, metavar="N[,N...]",
                       help=f"only these {name} values (default: the grid's)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    grid = dict(QUICK_GRID if args.quick else FULL_GRID)
    for name in grid:
        if getattr(args, name) is not None:
            try:
                grid[name] = tuple(int(x) for x in getattr(args, name).split(","))
            except ValueError:
                p.error(f"--{name.replace('_', '-')} takes comma-separated integers, got {getattr(args, name)!r}")
    cases = cases_from_grid(grid)
    impls = args.impls.split(",") if args.impls else None
    reps = args.reps or (3 if args.quick else 5)
    def log(text: str) -> None:  # progress on stderr, so stdout holds only the table or the JSON
        print(text, file=sys.stderr, flush=True)

    log(f"threads {torch.get_num_threads()}; measuring read bandwidth, then {len(cases)} cases")
    loop_max = QUICK_LOOP_MAX_TOKENS if args.quick else LOOP_MAX_TOKENS
    report = run_kernel_bench(cases, impls, args.device, reps=reps, bandwidth_mb=BANDWIDTH_MB,
                              loop_max_tokens=loop_max, log=log, cold=args.cold,
                              min_ms=args.min_ms if args.min_ms is not None else 0.0 if args.quick else MIN_TIMED_MS)
    print(json.dumps(report.to_dict(), indent=1) if args.json else format_report(report))
    return 0 if all(r.ok for c in report.cases for r in c.results) else 1
