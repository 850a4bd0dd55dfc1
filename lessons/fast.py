"""The kernel ladder for one small configuration, plus two sweeps: what page 7 runs live.

Built only from `benchmarks.kernels` (same data, same check against the contiguous reference, same interleaved
median timing, same KV GB/s), at sizes a shared CPU answers in a few seconds:

- the configuration itself: every rung (loop, gather, fused, native on CPU or triton on CUDA) and contiguous SDPA;
- a context sweep (SWEEP_CONTEXT_LENS, plus the configuration's own context_len) at its batch, heads, block_size;
- a block_size sweep (SWEEP_BLOCK_SIZES, plus its own) at its context_len.

The per-token "loop" runs only where batch * context_len <= LOOP_MAX_TOKENS (~10 us per token in
Python), and only at the configuration's own block_size (the configuration and the context sweep):
it was more than half of a run's time, and the block_size sweep is about the kernels that read
whole blocks. That and the repetitions below cut a run at the default knobs to about 0.4x of its
earlier time (docs/benchmarks.md).

    run = run_ladder(LadderConfig(batch=4, context_len=1024))
    run.main.results          # [ImplResult(impl="sdpa", ok=True, ms=…), ImplResult("loop", …), …]
    series(run.by_context, "context_len", "ms")   # {"sdpa": ([128, …], [0.2, …]), "gather": …}
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from paged.kv_cache import default_device
from benchmarks.kernels import CaseResult, ImplResult, KernelCase, bench_case, default_impls, read_bandwidth_gbps

RUNGS = ("loop", "gather", "fused", "native", "triton", "sdpa")  # the ladder: teaching loop ... the yardstick
SWEEP_CONTEXT_LENS = (128, 256, 512, 1024, 2048)
SWEEP_BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64)
LOOP_MAX_TOKENS = 4096  # batch * context_len above which the per-token loop is skipped
BANDWIDTH_MB = 128  # the x.sum() probe of the machine's read bandwidth
MAIN_REPS, SWEEP_REPS = 5, 3  # medians (interleaved across the rungs, after one warm-up each)
LIMITS = dict(batch=(1, 16), context_len=(1, 2048), block_size=(1, 64))
HEAD_DIMS = (32, 64, 128)
HEAD_COUNTS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class LadderConfig:
    """What the page's knobs choose. fp32, shuffled block tables, every sequence at context_len tokens."""

    batch: int = 4
    context_len: int = 1024
    num_heads: int = 8
    num_kv_heads: int = 2
    head_dim: int = 64
    block_size: int = 16
    loop: bool = True  # include the per-token loop where batch * context_len <= LOOP_MAX_TOKENS

    def __post_init__(self) -> None:
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {self.head_dim}")
        if self.num_heads not in HEAD_COUNTS or self.num_kv_heads not in HEAD_COUNTS:
            raise ValueError(f"num_heads and num_kv_heads must be in {HEAD_COUNTS}, got {self.num_heads}, "
                             f"{self.num_kv_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                             f"({self.num_kv_heads})")

    def case(self, context_len: int | None = None, block_size: int | None = None) -> KernelCase:
        return KernelCase(self.batch, context_len or self.context_len, self.num_heads, self.num_kv_heads,
                          self.head_dim, block_size or self.block_size)

    def loop_tokens(self, context_len: int | None = None) -> int:
        return self.batch * (context_len or self.context_len)

    def loop_allowed(self, context_len: int | None = None) -> bool:
        """Whether the per-token loop runs at this context_len (chosen, and batch * context_len small enough)."""
        return self.loop and self.loop_tokens(context_len) <= LOOP_MAX_TOKENS


@dataclass
class LadderRun:
    """One press of "run": the configuration, the sweeps, and the machine they were measured on."""

    config: LadderConfig
    device: str
    threads: int
    read_bw_gbps: float
    main: CaseResult
    by_context: list[CaseResult]
    by_block_size: list[CaseResult]
    seconds: float
    load_avg: float | None = None
    impls: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every impl matched the reference at every point."""
        return all(r.ok for c in [self.main, *self.by_context, *self.by_block_size] for r in c.results)

    def to_dict(self) -> dict:
        return asdict(self)


def run_ladder(config: LadderConfig, device: str | None = None, main_reps: int = MAIN_REPS,
               sweep_reps: int = SWEEP_REPS, sweeps: bool = True,
               progress: Callable[[int, int], None] | None = None,
               shown: Callable[[CaseResult], None] | None = None) -> LadderRun:
    """Check and time every rung on `config`, then (with sweeps) over context_len and over block_size.

    A point shared by the configuration and a sweep is measured once. `progress(done, total)` is called after each
    point; `shown(case)` with the configuration's own CaseResult as soon as its rungs are measured
    (the kernels, then again with the loop added), before any sweep.
    Raises: ValueError for a bad configuration (from LadderConfig), and whatever a kernel raises."""
    start = time.perf_counter()
    dev = torch.device(device) if device else default_device()
    impls = default_impls(dev)  # loop, gather, fused, native (CPU) or triton (CUDA); bench_case adds sdpa
    read_bw = read_bandwidth_gbps(dev, BANDWIDTH_MB)
    ctx_points = sorted(set(SWEEP_CONTEXT_LENS) | {config.context_len}) if sweeps else []
    bs_points = sorted(set(SWEEP_BLOCK_SIZES) | {config.block_size}) if sweeps else []
    todo = [(config.context_len, config.block_size)] + [(n, config.block_size) for n in ctx_points] \
        + [(config.context_len, bs) for bs in bs_points]
    unique = list(dict.fromkeys(todo))
    done: dict[tuple[int, int], CaseResult] = {}
    fast = [x for x in impls if x != "loop"]
    for i, (n, bs) in enumerate(unique):
        reps = main_reps if (n, bs) == todo[0] else sweep_reps
        case = config.case(n, bs)
        done[(n, bs)] = bench_case(case, fast, dev, read_bw, reps=reps, warmup=1)
        if shown and i == 0:
            shown(done[(n, bs)])
        if config.loop_allowed(n) and bs == config.block_size:
            # timed in a case of its own: its thousands of tiny tensors slow whatever is timed next to it
            # (gather measured 2-3x slower beside it here); same seeded data, ratios taken to this point's sdpa
            alone = bench_case(case, ["loop"], dev, read_bw, reps=min(reps, 3), warmup=0,
                               loop_max_tokens=LOOP_MAX_TOKENS)
            _add_rung(done[(n, bs)], next(r for r in alone.results if r.impl == "loop"))
            if shown and i == 0:
                shown(done[(n, bs)])
        if progress:
            progress(i + 1, len(unique))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return LadderRun(config, str(dev), torch.get_num_threads(), read_bw, done[todo[0]],
                     [done[(n, config.block_size)] for n in ctx_points],
                     [done[(config.context_len, bs)] for bs in bs_points],
                     time.perf_counter() - start, load, impls)


def _add_rung(case: CaseResult, r: ImplResult) -> None:
    """Put a rung timed in a separate case into `case`, its ratios recomputed against `case`'s own sdpa / gather,
    in ladder order."""
    ms = {x.impl: x.ms for x in case.results}
    r.x_sdpa = r.ms / ms["sdpa"]
    r.x_gather = r.ms / ms["gather"] if "gather" in ms else None
    case.results.append(r)
    case.results.sort(key=lambda x: RUNGS.index(x.impl) if x.impl in RUNGS else len(RUNGS))


def series(cases: list[CaseResult], x: str, value: str) -> dict[str, tuple[list[int], list[float]]]:
    """impl -> (xs, ys) over `cases`, x a KernelCase field ("context_len", "block_size"), value an ImplResult
    field ("ms", "gbps", "x_sdpa"). Impls in ladder order; a point where an impl did not run is left out."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for impl in RUNGS:
        pts = [(getattr(c.case, x), getattr(r, value)) for c in cases for r in c.results
               if r.impl == impl and getattr(r, value) is not None]
        if pts:
            out[impl] = ([p[0] for p in pts], [p[1] for p in pts])
    return out
