"""Every decode impl ("loop", "gather", "fused", "native", "triton") equals attention over contiguous K/V holding the same data.

The Triton kernel runs in a subprocess with TRITON_INTERPRET=1 (it must be set before triton is imported, and this
process must not change how other tests see triton)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from decode_cases import DTYPES, TOL, build, case_error, ragged_lens, sweep_failures  # noqa: F401
from helpers import rel_err
from paged.attention import contiguous_attention_decode, paged_attention_decode
from paged.kernels.workspace import Workspace
from paged.kernels import fused, triton_available

pytestmark = pytest.mark.kernels

REPO = Path(__file__).resolve().parents[3]
HEADS = [(8, 8), (8, 2), (8, 1)]
HEAD_DIMS = [32, 64, 80, 128]
BLOCK_SIZES = [1, 4, 16, 32]
@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These tensors are tiny: a second intra-op thread only adds barriers, which cost milliseconds each when
    the cores are shared with other work. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_tiles(monkeypatch):
    """fused tiles of ~16 tokens, so the online softmax rescales across several tiles and masks whole tiles."""
    monkeypatch.setattr(fused, "tile_blocks", lambda batch, block_size, *rest: max(1, 16 // block_size))


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("impl", ["loop", "gather", "fused", "native"])
def test_core_parity_sweep(impl, dtype_name, tiny_tiles):
    """loop/gather/fused/native match the contiguous reference over heads, head_dim, block_size and ragged lengths."""
    assert sweep_failures(impl, dtype_name, HEADS, HEAD_DIMS, BLOCK_SIZES) == []


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_fused_default_tiles(dtype_name):
    """fused also matches with its default (multi-block) tile size, where one tile covers every sequence."""
    assert sweep_failures("fused", dtype_name, HEADS, [64, 80], [4, 16]) == []


def test_fused_float64_stays_float64(tiny_tiles):
    """float64 inputs are computed and returned in float64 (error at float64 rounding level)."""
    query, kc, vc, tables, keys, values = build(8, 2, 64, 4, [1, 5, 54], torch.float64)
    ref = contiguous_attention_decode(query, keys, values, [1, 5, 54])
    out = paged_attention_decode(query, kc, vc, tables, [1, 5, 54], impl="fused")
    assert out.dtype == torch.float64 and rel_err(out, ref) < 1e-12


def test_fused_holds_one_tile_not_the_history(monkeypatch):
    """fused never materialises a sequence's K/V: its K/V buffers hold one tile, far less than the whole history."""
    monkeypatch.setattr(fused, "_buffers", Workspace())
    monkeypatch.setattr(fused, "TILE_BYTES_PER_THREAD", 64 * 1024)  # this module runs 1 thread
    lens = [1000, 700, 999]
    query, kc, vc, tables, keys, values = build(4, 2, 32, 16, lens, torch.float32)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="fused")
    assert rel_err(out, contiguous_attention_decode(query.double(), keys, values, lens)) < 1e-5
    kv_buffers = {key[0]: buf for key, buf in fused._buffers.buffers.items() if buf.is_floating_point()}
    held = sum(buf.numel() * buf.element_size() for buf in kv_buffers.values())
    history = 2 * sum(lens) * 2 * 32 * 4  # K and V bytes of every sequence
    assert kv_buffers["fused_k"].numel() * 4 <= 64 * 1024 and held <= 2 * 64 * 1024 < history / 10


def test_fused_matches_gather_on_a_bigger_batch():
    """fused equals gather (fp32, < 1e-5) on a batch spanning several default tiles."""
    lens = [2048, 1500, 1, 777]
    query, kc, vc, tables, _, _ = build(8, 8, 64, 16, lens, torch.float32, seed=3)
    fused_out = paged_attention_decode(query, kc, vc, tables, lens, impl="fused")
    gather_out = paged_attention_decode(query, kc, vc, tables, lens, impl="gather")
    assert rel_err(fused_out, gather_out) < 1e-5


def test_triton_missing_raises_clear_error(monkeypatch):
    """Without the triton package, impl='triton' raises RuntimeError saying what to install."""
    import paged.kernels as kernels

    monkeypatch.setattr(kernels, "triton_available", lambda: False)
    query, kc, vc, tables, _, _ = build(2, 2, 16, 4, [5], torch.float32)
    with pytest.raises(RuntimeError, match="pip install triton"):
        paged_attention_decode(query, kc, vc, tables, [5], impl="triton")


# ----------------------------------------------------------------------------------------------------------------
# Triton, in a subprocess under the interpreter (~1 ms per program and block: a reduced sweep)
# ----------------------------------------------------------------------------------------------------------------
TRITON_SWEEP = """
import json, sys
sys.path[:0] = [{repo!r}, {tests!r}, {here!r}]
import torch
from decode_cases import sweep_failures
torch.set_num_threads(1)
bad = []
bad += sweep_failures("triton", "float32", [(8, 2)], [32, 80], [4, 16], lambda bs: [1, bs, bs + 1, 54])
bad += sweep_failures("triton", "float32", [(8, 8)], [80], [16], lambda bs: [1, bs, bs + 1, 54])
bad += sweep_failures("triton", "float32", [(8, 1)], [80], [1, 32], lambda bs: [1, bs + 1, 9])
for dtype in ("float16", "bfloat16"):
    bad += sweep_failures("triton", dtype, [(8, 2)], [80], [16], lambda bs: [1, bs + 1, 54])
print(json.dumps(bad))
"""

TRITON_ERRORS = """
import sys
sys.path[:0] = [{repo!r}, {tests!r}, {here!r}]
import torch
from decode_cases import build
from paged.attention import paged_attention_decode
for block_size in (3, 4):
    q, kc, vc, tables, _, _ = build(2, 2, 16, block_size, [5], torch.float32)
    try:
        paged_attention_decode(q, kc, vc, tables, [5], impl="triton")
        print("no error")
    except (ValueError, RuntimeError) as err:
        print(type(err).__name__, err)
"""


def _run(script: str, interpret: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    code = script.format(repo=str(REPO), tests=str(REPO / "tests"), here=str(Path(__file__).parents[1]))
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300)


needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


@needs_triton
def test_triton_parity_sweep_interpreted():
    """The Triton kernel (interpreter) matches the reference: GQA and MHA, head_dim 80, block sizes 1-32, ragged."""
    proc = _run(TRITON_SWEEP, interpret=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@needs_triton
def test_triton_errors_are_clear():
    """block_size 3 raises ValueError (power of two needed); CPU tensors without the interpreter raise RuntimeError."""
    proc = _run(TRITON_ERRORS, interpret=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("ValueError") and "power of two" in lines[0]
    assert lines[1].startswith("RuntimeError") and "TRITON_INTERPRET=1" in lines[1]


def test_bench_summary_names_each_impls_worst_case():
    """`bench kernels` ends its table with one line per impl: the case slowest against sdpa and the case lowest in
    % of read bandwidth (the issue's two targets), and the slowest again by fastest reps. Hand-made results, so the
    expected lines do not come from timing."""
    from benchmarks.kernels import CaseResult, ImplResult, KernelCase, worst_cases

    def case(batch, native_x, native_pct, native_best):
        return CaseResult(KernelCase(batch, 512, 8, 2, 64), 1, [
            ImplResult("sdpa", True, 0.0, ms=1.0, x_sdpa=1.0, pct_bw=50.0, ms_best=1.0, x_sdpa_best=1.0),
            ImplResult("native", True, 0.0, ms=native_x, x_sdpa=native_x, pct_bw=native_pct, ms_best=native_best,
                       x_sdpa_best=native_best)])

    lines = worst_cases([case(1, 1.25, 90.0, 0.9), case(16, 0.5, 70.0, 1.1)])
    assert lines == [
        "native: slowest 1.25x sdpa (B=1 ctx=512 8/2 d=64); lowest 70% of read bandwidth (B=16 ctx=512 8/2 d=64); "
        "1/2 cases no slower than sdpa, 1/2 at >= 85%",
        "native, fastest reps: slowest 1.10x sdpa (B=16 ctx=512 8/2 d=64); 1/2 cases no slower than sdpa"]


def test_bench_summary_of_fastest_reps_names_the_lowest_share_of_bandwidth():
    """With the probe's fastest rep known, the fastest-reps line also names the case lowest in % of read bandwidth
    by fastest reps, and counts the cases at >= 85%. Hand-made results."""
    from benchmarks.kernels import CaseResult, ImplResult, KernelCase, worst_cases

    def case(batch, pct_best):
        return CaseResult(KernelCase(batch, 512, 8, 2, 64), 1, [
            ImplResult("sdpa", True, 0.0, ms=1.0, x_sdpa=1.0, pct_bw=50.0, ms_best=1.0, x_sdpa_best=1.0,
                       pct_bw_best=60.0),
            ImplResult("native", True, 0.0, ms=0.5, x_sdpa=0.5, pct_bw=80.0, ms_best=0.5, x_sdpa_best=0.5,
                       pct_bw_best=pct_best)])

    lines = worst_cases([case(1, 84.0), case(16, 97.0)])
    assert lines[-1] == ("native, fastest reps: slowest 0.50x sdpa (B=1 ctx=512 8/2 d=64); 2/2 cases no slower than "
                         "sdpa; lowest 84% of read bandwidth (B=1 ctx=512 8/2 d=64); 1/2 at >= 85%")


def test_bench_cold_reads_a_flush_buffer_before_every_timed_call(monkeypatch):
    """`bench kernels --cold`: an untimed read of COLD_MB runs before each timed call of each impl (and sdpa), so
    none starts with the cache the previous call left; without --cold, none runs."""
    from benchmarks import kernels

    monkeypatch.setattr(kernels, "COLD_MB", 1)
    calls = []
    timed = kernels._time_interleaved

    def spy(fns, reps, warmup, device, best=None, settle=None, after_itself=False, **rest):
        calls.append((len(fns) * reps, settle))
        counted = None if settle is None else (lambda: calls.append("settle") or settle())
        return timed(fns, reps, warmup, device, best, counted, after_itself, **rest)

    monkeypatch.setattr(kernels, "_time_interleaved", spy)
    case = kernels.KernelCase(1, 40, 4, 2, 16)
    for cold in (False, True):
        calls.clear()
        kernels.bench_case(case, ["gather"], torch.device("cpu"), 10.0, reps=3, warmup=0, cold=cold)
        assert calls.count("settle") == (2 * 3 if cold else 0)
        assert (calls[0][1] is not None) == cold


def test_warm_timing_runs_each_callable_right_before_its_timed_call():
    """Warm (not --cold): every timed call of a fast impl comes right after an untimed call of the same impl, so no
    impl is timed on the caches another one left (SDPA's GQA copy of K/V leaves dirty lines behind)."""
    from benchmarks import kernels

    order = []
    fns = {name: (lambda name=name: order.append(name)) for name in ("sdpa", "native")}
    kernels._time_interleaved(fns, reps=2, warmup=0, device=torch.device("cpu"), after_itself=True)
    assert order == ["sdpa", "sdpa", "native", "native"] * 2
    order.clear()
    kernels._time_interleaved(fns, reps=2, warmup=0, device=torch.device("cpu"))
    assert order == ["sdpa", "native"] * 2


def test_bench_cold_tells_native_its_kv_left_the_caches(monkeypatch):
    """--cold: each timed native call follows the flush, so it gets the cold prefetch threshold, although it reads
    the same pool as the call before it; warm (each timed call right after itself) gets the warm one."""
    from benchmarks import kernels
    from paged.kernels import native, native_plan

    monkeypatch.setattr(kernels, "COLD_MB", 1)
    fn, seen = native._load(), []

    def record(args, scale):  # args[18]: the K/V bytes from which this call prefetches
        seen.append(memoryview(args).cast("q")[18])
        return fn(args, scale)

    monkeypatch.setitem(native._state, "fn", record)
    case = kernels.KernelCase(1, 40, 4, 2, 16)
    for cold, expected in ((True, native_plan.PREFETCH_COLD_MIN_BYTES), (False, native_plan.PREFETCH_WARM_MIN_BYTES)):
        seen.clear()
        result = kernels.bench_case(case, ["native"], torch.device("cpu"), 10.0, reps=3, warmup=0, cold=cold)
        assert all(r.ok for r in result.results)
        assert seen[-3:] == [expected] * 3  # the timed calls (the check's and warm mode's untimed calls come first)


def test_short_calls_get_more_reps_until_min_ms_of_timed_calls(monkeypatch):
    """After `reps` reps, _time_interleaved goes on until every callable's timed calls add up to min_ms, never past
    MAX_REPS; min_ms 0 keeps exactly `reps`. A probe is timed in the first `reps` reps only. The bench's clock is a
    fake one that each call advances by its own cost, so the counts do not depend on the machine's load."""
    from types import SimpleNamespace

    from benchmarks import kernels

    now = [0.0]
    monkeypatch.setattr(kernels, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(kernels, "MAX_REPS", 7)
    counts = {"quick": 0, "slow": 0}

    def quick():
        counts["quick"] += 1

    def slow():
        counts["slow"] += 1
        now[0] += 0.003  # 3 ms a call

    def probe():
        now[0] += 0.001

    cpu = torch.device("cpu")
    for min_ms, expected in ((0.0, 2), (1e9, 7)):
        counts.update(quick=0, slow=0)
        probe_ms: list[float] = []
        kernels._time_interleaved({"quick": quick, "slow": slow}, 2, 0, cpu, min_ms=min_ms, probe=probe,
                                  probe_ms=probe_ms)
        assert counts == {"quick": expected, "slow": expected}
        assert len(probe_ms) == 2 and min(probe_ms) == pytest.approx(1.0)  # once in each of the first `reps` reps
    counts.update(slow=0)
    kernels._time_interleaved({"slow": slow}, 1, 0, cpu, min_ms=7.0)  # 3 ms a call: 3 reps reach 7 ms (6 < 7 <= 9)
    assert counts["slow"] == 3


def test_percent_of_bandwidth_is_taken_against_the_probe_timed_between_the_reps():
    """bench_case with probe_mb: read_bw comes from x.sum() timed between its reps, not from the value passed in,
    and every % bw is relative to it."""
    from benchmarks import kernels

    case = kernels.KernelCase(2, 64, 4, 2, 16)
    result = kernels.bench_case(case, ["gather"], torch.device("cpu"), 1e-9, reps=3, warmup=0, read_bw_best=1e-9,
                                probe_mb=8)
    assert 0.05 < result.read_bw_gbps < 1e4 and result.read_bw_best_gbps >= result.read_bw_gbps
    for r in result.results:
        assert r.pct_bw == pytest.approx(100 * r.gbps / result.read_bw_gbps)
        best_gbps = result.kv_bytes / (r.ms_best / 1e3) / 1e9
        assert r.pct_bw_best == pytest.approx(100 * best_gbps / result.read_bw_best_gbps)
