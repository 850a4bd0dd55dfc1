"""KV memory reserved but never used: contiguous reservation vs paged blocks, on a seeded trace.

A seeded trace of requests (prompt and output lengths drawn from stated, clipped lognormal
distributions) is served three ways, counting KV slots (one slot = one token's K and V in every
layer):

- "max_len":  contiguous, each reserves max_model_len slots up front (what pre-vLLM servers did);
- "oracle":   contiguous, each reserves its final length up front (a bound: needs the future);
- "paged":    blocks of block_size slots on demand, ceil(length / block_size) blocks per request.

Two moments are measured: (1) at the final length, when each request's cache is largest; (2)
averaged over every decode step, when a request holding L tokens has produced only part of its
output (the oracle then still holds its whole reservation; paged holds at most block_size - 1 spare
slots). External fragmentation (holes between contiguous reservations of different sizes) is not
simulated, so the contiguous numbers are optimistic.

All functions are pure and return dataclasses: a page can chart them, `format_memory_report` prints
them.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field

from ..addressing import blocks_needed

BLOCK_SIZES = tuple(2 ** i for i in range(9))  # 1, 2, 4, ..., 256


@dataclass(frozen=True)
class Request:
    """One request of a trace: its prompt and output lengths in tokens."""

    prompt_len: int
    output_len: int

    @property
    def final_len(self) -> int:
        """Tokens in the KV cache when the request finishes."""
        return self.prompt_len + self.output_len


@dataclass(frozen=True)
class TraceSpec:
    """Where the lengths come from: lognormal draws with the given median and sigma (of the log),
    rounded and clipped; max_model_len must hold the longest possible request.
    Raises: ValueError for no requests, bounds out of order, or max_model_len too small."""

    num_requests: int = 1000
    seed: int = 0
    prompt_median: float = 200.0
    prompt_sigma: float = 0.8
    prompt_min: int = 16
    prompt_max: int = 1024
    output_median: float = 100.0
    output_sigma: float = 1.0
    output_min: int = 1
    output_max: int = 1024
    max_model_len: int = 2048

    def __post_init__(self) -> None:
        if self.num_requests < 1:
            raise ValueError(f"num_requests must be >= 1, got {self.num_requests}")
        if not (1 <= self.prompt_min <= self.prompt_max
                and 1 <= self.output_min <= self.output_max):
            raise ValueError("need 1 <= prompt_min <= prompt_max and 1 <= output_min <= output_max")
        if self.prompt_max + self.output_max > self.max_model_len:
            raise ValueError(f"max_model_len {self.max_model_len} is below prompt_max + output_max "
                             f"({self.prompt_max + self.output_max})")

    def describe(self) -> str:
        """The spec in one line (the report states it above its table)."""
        return (f"{self.num_requests} requests, seed {self.seed}; prompt ~ lognormal(median "
                f"{self.prompt_median:g}, sigma {self.prompt_sigma:g}) clipped to "
                f"[{self.prompt_min}, {self.prompt_max}]; output ~ lognormal(median "
                f"{self.output_median:g}, sigma {self.output_sigma:g}) clipped to "
                f"[{self.output_min}, {self.output_max}]; max_model_len {self.max_model_len}")


def make_trace(spec: TraceSpec) -> list[Request]:
    """The seeded trace: the same spec always gives the same requests."""
    rng = random.Random(spec.seed)

    def draw(median: float, sigma: float, lo: int, hi: int) -> int:
        return min(hi, max(lo, round(rng.lognormvariate(math.log(median), sigma))))

    return [Request(draw(spec.prompt_median, spec.prompt_sigma, spec.prompt_min, spec.prompt_max),
                    draw(spec.output_median, spec.output_sigma, spec.output_min, spec.output_max))
            for _ in range(spec.num_requests)]


def paged_slots(length: int, block_size: int) -> int:
    """Slots held by a paged request of `length` tokens: ceil(length / block_size) whole blocks.
    Raises: ValueError unless block_size >= 1 and length >= 0."""
    if block_size < 1 or length < 0:
        raise ValueError(f"need block_size >= 1 and length >= 0, got {block_size}, {length}")
    return blocks_needed(length, block_size) * block_size


def reserved_slots(scheme: str, length: int, final_len: int, max_model_len: int,
                   block_size: int = 1) -> int:
    """Slots a request holds while it has `length` tokens, under `scheme` (max_len, oracle, paged).
    Raises: ValueError for another scheme."""
    if scheme == "max_len":
        return max_model_len
    if scheme == "oracle":
        return final_len
    if scheme == "paged":
        return paged_slots(length, block_size)
    raise ValueError(f"unknown scheme {scheme!r}; choose max_len, oracle or paged")


@dataclass(frozen=True)
class SchemeResult:
    """One scheme on one trace: token slots; *_pct are percentages of what was reserved."""

    scheme: str
    block_size: int | None
    needed_slots: int  # sum of final lengths
    reserved_slots: int  # sum of reservations at the final length
    waste_slots: int
    waste_pct: float  # at the final length: (reserved - needed) / reserved
    waste_per_request: float  # mean spare slots per request at the final length
    decode_waste_pct: float  # averaged over every decode step of every request
    fit_requests: int  # requests, in trace order at their final length, fitting the budget at once


@dataclass
class MemoryReport:
    """Every scheme's SchemeResult on one trace, with the trace's spec and the slot budget."""

    spec: TraceSpec
    budget_slots: int
    mean_final_len: float
    results: list[SchemeResult] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def fit_count(reservations: list[int], budget_slots: int) -> int:
    """How many reservations, taken in order, fit in budget_slots together (to the first misfit)."""
    used = 0
    for count, r in enumerate(reservations):
        if used + r > budget_slots:
            return count
        used += r
    return len(reservations)


def evaluate(scheme: str, trace: list[Request], max_model_len: int, budget_slots: int,
             block_size: int | None = None) -> SchemeResult:
    """Reserved vs needed for one scheme, at the final length and over every decode step."""
    bs = block_size or 1
    final = [reserved_slots(scheme, r.final_len, r.final_len, max_model_len, bs) for r in trace]
    needed = sum(r.final_len for r in trace)
    reserved = sum(final)
    # Decode steps: after each generated token the cache holds L = prompt_len + 1 ... final_len.
    step_needed = step_reserved = 0
    for r in trace:
        for length in range(r.prompt_len + 1, r.final_len + 1):
            step_needed += length
            step_reserved += reserved_slots(scheme, length, r.final_len, max_model_len, bs)
    return SchemeResult(scheme, block_size, needed, reserved, reserved - needed,
                        100.0 * (reserved - needed) / reserved, (reserved - needed) / len(trace),
                        100.0 * (step_reserved - step_needed) / step_reserved,
                        fit_count(final, budget_slots))


def simulate(spec: TraceSpec = TraceSpec(), block_sizes: tuple[int, ...] = BLOCK_SIZES,
             budget_slots: int = 65536) -> MemoryReport:
    """Every scheme on the trace of `spec`: max_len, oracle, then paged for each block size."""
    trace = make_trace(spec)
    report = MemoryReport(spec, budget_slots, sum(r.final_len for r in trace) / len(trace))
    report.results.append(evaluate("max_len", trace, spec.max_model_len, budget_slots))
    report.results.append(evaluate("oracle", trace, spec.max_model_len, budget_slots))
    for bs in block_sizes:
        report.results.append(evaluate("paged", trace, spec.max_model_len, budget_slots, bs))
    return report


def format_memory_report(report: MemoryReport) -> str:
    """An aligned table with the trace and the budget stated above it."""
    lines = [f"trace: {report.spec.describe()}",
             f"mean final length {report.mean_final_len:.1f} tokens; budget {report.budget_slots} "
             f"token slots; 'fit' = requests taken in trace order, all at their final length, held "
             f"at once",
             f"{'scheme':>14} {'reserved':>10} {'needed':>10} {'waste %':>8} {'spare/req':>9} "
             f"{'decode waste %':>14} {'fit':>5}"]
    for r in report.results:
        name = r.scheme if r.block_size is None else f"paged bs={r.block_size}"
        lines.append(f"{name:>14} {r.reserved_slots:>10} {r.needed_slots:>10} {r.waste_pct:>8.2f} "
                     f"{r.waste_per_request:>9.1f} {r.decode_waste_pct:>14.2f} {r.fit_requests:>5}")
    return "\n".join(lines)
