"""impl="native" (the C kernel): beyond the Core parity sweep in test_kernels.py, the cases C makes risky.

Threads and work splitting, the plain (no AVX2, pthread) build, head_dims that are no multiple of 8, float64, and
memory safety: with validation off (as the bug lab runs), a bad block id or context_len must raise, not read
foreign memory; and the C code itself runs clean under AddressSanitizer (tests/paged/native_asan.c)."""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers import rel_err
from paged.attention import contiguous_attention_decode, paged_attention_decode
from paged.kernels import native, native_build, native_ops, native_plan
from paged.model.rope import apply_rope
from paged.kernels.native import DecodeStep
from decode_cases import build, sweep_failures

pytestmark = pytest.mark.kernels


@pytest.fixture
def threads():
    """Set torch's intra-op threads (the C kernel uses as many); restored afterwards."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def fresh_plans():
    """native_decode caches each call's plan (threads, work cut) by its shapes and dtypes: each test starts and ends
    with none, so a plan made under a patched SECOND_THREAD_NS or plan_work never outlives the patch."""
    native.forget_plans()
    yield
    native.forget_plans()


@pytest.fixture
def fresh_native(monkeypatch, tmp_path):
    """A native module that has loaded nothing yet and builds into an empty cache folder."""
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(native_build, "_private_tmp", [])
    monkeypatch.setenv("PAGED_CACHE_DIR", str(tmp_path))
    return tmp_path


def reference(query, keys, values, lens):
    return contiguous_attention_decode(query.double(), keys, values, lens)


@pytest.mark.parametrize("num_threads", [1, 2, 3])
@pytest.mark.parametrize("lens", [[97], [1, 2048, 300, 17, 64, 1000, 5]])
def test_threads_and_head_chunks(threads, num_threads, lens):
    """Any thread count gives the reference result: one sequence is split by kv heads across threads, a batch is
    shared out a sequence at a time; prefetching crosses many blocks."""
    threads(num_threads)
    query, kc, vc, tables, keys, values = build(8, 4, 64, 16, lens, torch.float32, seed=num_threads)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
    assert rel_err(out, reference(query, keys, values, lens)) < 1e-5


@pytest.mark.parametrize("group", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("head_dim, block_size", [(64, 16), (72, 1), (128, 64)])
def test_every_query_head_group_size(threads, group, head_dim, block_size):
    """The AVX2 loops take a kv head's query heads in tiles of 4, 2 and 1 (group 5 = 4 + 1, 3 = 2 + 1, 8 = 4 + 4),
    and each block's tokens 8 at a time with a tail of 1..7: every group size, on 1 and 2 threads, with lengths
    that end mid-tile and mid-block, matches the reference. With AVX-512, head_dim 64 and 128 take the 16-float
    tiles and 72 the 8-float ones."""
    lens = [1, 7, 9, 130, 333]
    for num_threads in (1, 2):
        threads(num_threads)
        query, kc, vc, tables, keys, values = build(2 * group, 2, head_dim, block_size, lens, torch.float32,
                                                    seed=group)
        out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
        assert rel_err(out, reference(query, keys, values, lens)) < 1e-5, (group, num_threads)


@pytest.mark.parametrize("head_dim", [4, 20, 36])
def test_head_dims_off_the_vector_width(head_dim):
    """head_dim not a multiple of 8 takes the portable loops instead of the AVX2 ones, and still matches."""
    lens = [1, 5, 33, 70]
    query, kc, vc, tables, keys, values = build(6, 2, head_dim, 4, lens, torch.float32)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
    assert rel_err(out, reference(query, keys, values, lens)) < 1e-5


def test_float64_is_computed_in_float64():
    """A float64 pool is summed in float64: the error is at float64 rounding level."""
    lens = [1, 5, 54]
    query, kc, vc, tables, keys, values = build(8, 2, 64, 4, lens, torch.float64)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
    assert out.dtype == torch.float64 and rel_err(out, reference(query, keys, values, lens)) < 1e-12


def model_ops_match_torch(monkeypatch) -> bool:
    """The model's C ops (native_ops), loaded from the library built now, against torch's: SwiGLU's middle on rows
    off the vector widths (the scalar tail), RMSNorm, RoPE."""
    monkeypatch.setattr(native_ops, "_loaded", [])  # load them from this build
    g = torch.Generator().manual_seed(5)
    both, x, w = torch.randn(5, 2 * 45, generator=g) * 4, torch.randn(5, 45, generator=g), torch.randn(45, generator=g)
    gate, up = both.narrow(1, 0, 45), both.narrow(1, 45, 45)
    qk, trig = torch.randn(5, 3, 12, generator=g), torch.randn(5, 2, 12, generator=g)
    cos, sin = trig.narrow(1, 0, 1), trig.narrow(1, 1, 1)
    want = (F.silu(gate) * up, F.rms_norm(x, (45,), w, eps=1e-6), apply_rope(qk, cos, sin))
    with torch.no_grad():
        got = (native_ops.silu_mul_(gate, up), native_ops.rms_norm(x, w, 1e-6), native_ops.rope_(qk, cos, sin))
    return all(rel_err(a, b) < 1e-5 for a, b in zip(got, want))


def test_plain_build_without_avx2_or_openmp(fresh_native, monkeypatch, threads):
    """The fallback build (no -march=native, pthreads instead of OpenMP) passes the parity sweep too, and its model
    ops (scalar loops) match torch's."""
    monkeypatch.setattr(native_build, "FLAG_SETS", (("-O3", "-pthread", "-shared", "-fPIC"),))
    threads(2)
    assert sweep_failures("native", "float32", [(8, 2), (4, 4)], [32, 20], [1, 16]) == []
    assert sweep_failures("native", "bfloat16", [(8, 2)], [32], [16]) == []
    assert model_ops_match_torch(monkeypatch)
    assert len(list(fresh_native.glob("native_decode-*.so"))) == 1


def test_avx2_build_without_avx512(fresh_native, monkeypatch, threads):
    """Without AVX-512VL the AVX2 tiles hold 8 registers, not 16 (TILE_REGS in native_avx2.h): that build matches
    the reference too, for every query head group size (on a CPU without AVX-512 this is the default build)."""
    flags = ("-O3", "-march=native", "-mno-avx512f", "-fopenmp", "-shared", "-fPIC")
    monkeypatch.setattr(native_build, "FLAG_SETS", (flags,))
    threads(2)
    assert sweep_failures("native", "float32", [(8, 8), (8, 4), (6, 2), (8, 2), (8, 1)], [64, 72], [1, 16]) == []
    assert model_ops_match_torch(monkeypatch)  # SwiGLU's middle on 8-float vectors
    assert len(list(fresh_native.glob("native_decode-*.so"))) == 1


@pytest.mark.parametrize("num_heads, num_kv_heads", [(20, 4), (12, 1), (9, 9)])
def test_more_than_eight_query_heads_in_one_item(threads, num_heads, num_kv_heads):
    """The AVX2 softmax step takes 8 query heads at a time (16 with AVX-512): an item holding 20 (GQA 5 per kv head),
    12 (MQA) or 9 (MHA) heads runs it on full and partial groups of 8 (of 16). Scores scaled up so that the running
    max moves from block to block (each rescale matters); ragged lengths, one thread (one item holds every head).
    Matches the reference."""
    threads(1)
    lens = [1, 17, 100]
    query, kc, vc, tables, keys, values = build(num_heads, num_kv_heads, 64, 16, lens, torch.float32, seed=3)
    query = query * 4
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
    assert rel_err(out, reference(query, keys, values, lens)) < 1e-5


def test_bad_block_id_raises_instead_of_reading(monkeypatch):
    """validate=False skips the Python checks, yet a block id outside the pool is refused by the kernel."""
    lens = [5, 40]
    query, kc, vc, tables, _, _ = build(4, 2, 32, 16, lens, torch.float32)
    for bad_id in (kc.shape[0], 10**9, -1):
        broken = tables.clone()
        broken[1, 1] = bad_id
        with pytest.raises(ValueError, match="sequence 1.*outside the pool"):
            paged_attention_decode(query, kc, vc, broken, lens, impl="native", validate=False)


@pytest.mark.parametrize("lens", [[5, 0], [5, 10**6]])
def test_context_len_out_of_range_raises(lens):
    """context_len 0 (nothing to attend to) or past the table's end raises ValueError, even with validate=False."""
    query, kc, vc, tables, _, _ = build(4, 2, 32, 16, [5, 7], torch.float32)
    with pytest.raises(ValueError, match="context_len must be in 1"):
        paged_attention_decode(query, kc, vc, tables, lens, impl="native", validate=False)


def test_shape_and_device_errors():
    """Mismatched shapes, non-CPU tensors and unsupported dtypes raise ValueError naming the problem."""
    query, kc, vc, tables, _, _ = build(4, 2, 32, 16, [5], torch.float32)
    with pytest.raises(ValueError, match="disagree"):
        paged_attention_decode(query[..., :16], kc, vc, tables, [5], impl="native", validate=False)
    with pytest.raises(ValueError, match="CPU tensors"):
        native.native_decode(query.to("meta"), kc, vc, tables, torch.tensor([5]), 1.0)
    with pytest.raises(ValueError, match="one dtype"):
        native.native_decode(query, kc.int(), vc.int(), tables, torch.tensor([5]), 1.0)


def test_a_cached_plan_still_checks_each_call(threads):
    """After a call has cached the plan of its shapes and dtypes, a call of the same shapes still gets its own
    checks: a query on another device raises, a non-contiguous query is read right, a pool of another size is
    bounds-checked against its own num_blocks, and another thread count gets a plan of its own."""
    threads(2)
    lens = [5, 40]
    query, kc, vc, tables, keys, values = build(4, 2, 32, 16, lens, torch.float32)
    ref = reference(query, keys, values, lens)
    lens_t = torch.tensor(lens)
    assert rel_err(native.native_decode(query, kc, vc, tables, lens_t, 1 / 32 ** 0.5), ref) < 1e-5
    with pytest.raises(ValueError, match="CPU tensors"):
        native.native_decode(query.to("meta"), kc, vc, tables, lens_t, 1.0)
    strided = torch.cat([query, query], dim=-1)[..., :32]  # same shape, not contiguous
    assert not strided.is_contiguous()
    assert rel_err(native.native_decode(strided, kc, vc, tables, lens_t, 1 / 32 ** 0.5), ref) < 1e-5
    small_k, small_v = kc[:int(tables.max())], vc[:int(tables.max())]  # the highest block id is now outside
    with pytest.raises(ValueError, match="outside the pool"):
        native.native_decode(query, small_k, small_v, tables, lens_t, 1.0)
    threads(1)
    assert rel_err(native.native_decode(query, kc, vc, tables, lens_t, 1 / 32 ** 0.5), ref) < 1e-5
    assert {key[-1] for key in native._plans} == {1, 2}


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2), (torch.float64, 1e-12)])
def test_decode_step_reads_each_layer_of_the_pool(threads, dtype, tol):
    """DecodeStep (the engine's per-step native call) on a 3-layer pool, layer l holding K * 2**l and V / 2**l:
    each layer, in any order, matches the reference of that layer's K/V, in the query's dtype, and equals
    native_decode on that layer; a layer outside the pool, a query unlike the prepared one and a bad block id
    raise ValueError."""
    threads(2)
    lens = [5, 40, 17]
    query, kc, vc, tables, keys, values = build(8, 2, 32, 16, lens, dtype)
    pool_k = torch.stack([kc * 2 ** layer for layer in range(3)])  # [num_layers, num_blocks, block_size, 2, 32]
    pool_v = torch.stack([vc / 2 ** layer for layer in range(3)])
    lens_t, scale = torch.tensor(lens), 1 / 32 ** 0.5
    step = DecodeStep(query, pool_k, pool_v, tables, lens_t, scale)
    for layer in (2, 0, 1, 1):
        out = step(layer, query)
        assert out.dtype == dtype and out.shape == query.shape
        ref = reference(query, keys * 2 ** layer, values / 2 ** layer, lens)
        assert rel_err(out, ref) < tol, layer
        alone = native.native_decode(query, pool_k[layer], pool_v[layer], tables, lens_t, scale).to(dtype)
        assert torch.equal(out, alone)
    for bad in (3, -1, 1.0):
        with pytest.raises(ValueError, match="outside"):
            step(bad, query)
    with pytest.raises(ValueError, match="prepared for"):
        step(0, query[:2])
    broken = tables.clone()
    broken[1, 1] = kc.shape[0]
    with pytest.raises(ValueError, match="sequence 1.*outside the pool"):
        DecodeStep(query, pool_k, pool_v, broken, lens_t, scale)(0, query)


def test_no_compiler_is_a_clear_error(fresh_native, monkeypatch):
    """Without a C compiler native_available() is False and the impl raises RuntimeError saying what to install."""
    monkeypatch.setattr(native_build, "compiler", lambda: None)
    assert not native.native_available()
    query, kc, vc, tables, _, _ = build(4, 2, 32, 16, [5], torch.float32)
    with pytest.raises(RuntimeError, match="needs a C compiler"):
        paged_attention_decode(query, kc, vc, tables, [5], impl="native")
    assert list(fresh_native.iterdir()) == []


def test_failed_build_is_reported(fresh_native, monkeypatch):
    """A compiler that rejects every flag set gives RuntimeError with its message, not a crash."""
    monkeypatch.setattr(native_build, "FLAG_SETS", (("--no-such-flag-for-sure",),))
    with pytest.raises(RuntimeError, match="could not be built"):
        native._load()


@pytest.mark.parametrize("threads_flag, prefetch_min, isa", [("-fopenmp", None, []),
                                                             ("-pthread", "0", ["-mno-avx512f"])])
def test_kernel_stays_inside_its_buffers_under_address_sanitizer(tmp_path, threads_flag, prefetch_min, isa):
    """tests/paged/native_asan.c calls the kernel on exact-size heap buffers (192 cases: every dtype, GQA/MQA, odd
    head_dims and block sizes, ragged -1 padded int32/int64 tables, 1 or 3 threads, split heads, partitions and
    none) built with AddressSanitizer and UBSan: any read or write outside them aborts. Each case is also checked
    against plain attention in C; a bad block id and a context_len past the table are refused. The pthread build
    prefetches the next block on every call (PREFETCH_MIN_BYTES=0), the OpenMP build on none of these small ones;
    the pthread build leaves AVX-512 out, so the AVX2 tiles hold 8 registers, not 16 (on a CPU that has it). The
    model's small ops (native_ops.h) run there too, each checked against a double computation."""
    cc = native_build.compiler()
    assert cc, "a C compiler is needed (apt-get install gcc)"
    exe = tmp_path / "native_asan"
    defines = [f"-DPREFETCH_MIN_BYTES={prefetch_min}"] if prefetch_min is not None else []
    build = subprocess.run([*cc, "-O1", "-g", "-march=native", *isa, threads_flag, *defines,
                            "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-o", str(exe),
                            str(Path(__file__).parents[1] / "native_asan.c"), "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})
    assert run.returncode == 0 and "192 cases, 0 failed; model ops: 0 failed" in run.stdout, \
        run.stdout + run.stderr[-3000:]


@pytest.mark.parametrize("threads_flag", ["-fopenmp", "-pthread"])
def test_calls_stay_on_one_thread_while_helpers_come_too_late(tmp_path, monkeypatch, threads, threads_flag):
    """A kernel built with LATE_HELPER_US=30000 (each helper sleeps 30 ms before it starts, as one does on a machine
    whose other core is busy): a call on 2 threads finds its helper took no item, so the next call runs on one
    thread; the next 2-thread call, late again, puts the next two on one; each result matches the reference."""
    cc = native_build.compiler()
    assert cc, "a C compiler is needed (apt-get install gcc)"
    lib_path = tmp_path / "late.so"
    made = subprocess.run([*cc, "-O1", "-march=native", threads_flag, "-DLATE_HELPER_US=30000", "-shared", "-fPIC",
                           "-o", str(lib_path), str(native_build.SOURCE), "-lm"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    lib = ctypes.CDLL(str(lib_path))
    fn, left = lib.paged_decode_packed, lib.paged_solo_calls_left
    fn.restype, fn.argtypes, left.restype = ctypes.c_int64, [ctypes.c_void_p, ctypes.c_double], ctypes.c_int64
    monkeypatch.setitem(native._state, "fn", fn)
    monkeypatch.setattr(native_plan, "SECOND_THREAD_NS", 0.0)
    threads(2)
    lens = [40, 7]
    query, kc, vc, tables, keys, values = build(8, 2, 64, 16, lens, torch.float32)
    seen = []
    for _ in range(5):
        out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
        assert rel_err(out, reference(query, keys, values, lens)) < 1e-5
        seen.append(left())
    assert seen == [1, 0, 2, 1, 0]


@pytest.mark.parametrize("partition_blocks", [1, 3])
def test_partitioned_contexts_match_the_reference(monkeypatch, threads, partition_blocks):
    """Contexts cut into partitions of 1 or 3 blocks (items of their own, merged by the combine step) match the
    reference: GQA/MHA/MQA, head_dims on and off the vector width, float32/bfloat16/float64, and sequences shorter
    than one partition next to longer ones."""
    monkeypatch.setattr(native_plan, "plan_work", lambda *args: (1, partition_blocks))
    threads(2)
    assert sweep_failures("native", "float32", [(8, 2), (4, 4), (6, 1)], [32, 20], [1, 16]) == []
    assert sweep_failures("native", "bfloat16", [(8, 2)], [32], [4]) == []
    lens = [1, 5, 54]
    query, kc, vc, tables, keys, values = build(8, 2, 64, 4, lens, torch.float64)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
    assert rel_err(out, reference(query, keys, values, lens)) < 1e-12


@pytest.mark.parametrize("batch, num_kv_heads, threads_, max_blocks, head_chunks, parts", [
    (16, 8, 2, 128, 1, 1),  # enough sequences: no cutting
    (2, 8, 2, 128, 1, 1),   # one sequence per thread
    (5, 8, 2, 128, 1, 1),   # at least two per thread: at most one more on one thread
    (1, 8, 2, 128, 1, 2),   # one long sequence, MHA: partitions, whole rows (vLLM's v2)
    (3, 8, 2, 128, 1, 2),   # 3 sequences on 2 threads: 6 items
    (2, 8, 3, 128, 1, 3),
    (1, 8, 2, 32, 1, 2),    # 512 tokens, MHA: two partitions' worth, partitions (whole blocks per thread)
    (1, 8, 2, 31, 2, 1),    # 496 tokens: too short for two partitions, heads
    (1, 2, 2, 128, 1, 2),   # GQA too: partitions, whole rows
    (1, 2, 8, 128, 1, 8),   # ... as many as the threads
    (1, 2, 2, 31, 2, 1),    # GQA, too short for two partitions: heads
    (1, 1, 8, 128, 1, 8),   # MQA: one kv head, so partitions
    (1, 1, 2, 16, 1, 1),    # nothing to cut
    (1, 1, 1, 128, 1, 1),   # one thread
])
def test_plan_work_gives_each_thread_equal_items(batch, num_kv_heads, threads_, max_blocks, head_chunks, parts):
    """The fewest equal items that share evenly over the threads (block_size 16, 8 query heads): contexts of two
    partitions or more are cut into partitions of at least MIN_PARTITION_TOKENS first (MHA and GQA alike), shorter
    ones by kv heads."""
    got_chunks, partition_blocks = native_plan.plan_work(batch, 8, num_kv_heads, max_blocks, 16, threads_)
    got_parts = -(-max_blocks // partition_blocks) if partition_blocks else 1
    assert (got_chunks, got_parts) == (head_chunks, parts)
    assert partition_blocks == 0 or partition_blocks * 16 >= native_plan.MIN_PARTITION_TOKENS
    items = batch * got_chunks * got_parts
    assert items % threads_ == 0 or items >= 2 * threads_ or (num_kv_heads, max_blocks) == (1, 16)


def _recording_kernel(monkeypatch) -> list[tuple]:
    """Wrap the loaded C function; returns the list its (threads, head_chunks, partition_blocks) calls go to."""
    fn, calls = native._load(), []

    def record(args, scale):  # args: paged_decode's packed arguments (bytes)
        calls.append(tuple(memoryview(args).cast("q")[1:4]))
        return fn(args, scale)

    monkeypatch.setitem(native._state, "fn", record)
    return calls


@pytest.mark.parametrize("block_size", [1, 32, 128])
@pytest.mark.parametrize("num_heads, num_kv_heads", [(8, 2), (8, 8), (4, 1)])
def test_planned_partitions_around_their_boundaries(threads, monkeypatch, block_size, num_heads, num_kv_heads):
    """One sequence on 2, 3 or 8 threads, as planned (no override): contexts one token short of, at and one past a
    partition boundary, so the planned cut gives 1, 2 and many partitions (with or without split heads), the last
    one holding a single token or a full partition; GQA, MHA and MQA; block_size 1, 32 and 128. Each matches the
    reference."""
    calls = _recording_kernel(monkeypatch)
    monkeypatch.setattr(native_plan, "SECOND_THREAD_NS", 0.0)  # keep the threads on these small contexts
    p = native_plan.MIN_PARTITION_TOKENS
    parts_seen = set()
    for num_threads, n in [(2, p - 1), (2, 2 * p), (2, 2 * p + 1), (3, 3 * p), (8, 4 * p - 1), (8, 8 * p + 1)]:
        threads(num_threads)
        query, kc, vc, tables, keys, values = build(num_heads, num_kv_heads, 32, block_size, [n], torch.float32,
                                                    seed=n)
        out = paged_attention_decode(query, kc, vc, tables, [n], impl="native")
        assert rel_err(out, reference(query, keys, values, [n])) < 1e-5, (num_threads, n)
        partition_blocks = calls[-1][2]
        parts_seen.add(-(-(-(-n // block_size)) // partition_blocks) if partition_blocks else 1)
    assert {1, 2} <= parts_seen and max(parts_seen) >= 4


@pytest.mark.parametrize("batch, num_heads, num_kv_heads, head_dim, tokens, expected", [
    # (2 threads' time / 1 thread's, fastest of 21 reps, on the 2-core machine the constants were fitted on)
    (1, 8, 8, 64, 16, 1),    # 64 KiB of K/V: 1.07-1.08x slower on two
    (1, 4, 2, 32, 256, 1),   # the tiny model, one sequence, 128 KiB: 1.05x slower on two
    (32, 4, 2, 32, 2, 2),    # the tiny model, 32 sequences of 2 tokens, 32 KiB: 0.92x on two
    (16, 8, 2, 64, 2, 2),    # 32 KiB: 0.87x
    (1, 8, 8, 64, 512, 2),   # 2 MiB: 0.67x
])
def test_thread_count_follows_the_measured_crossover(batch, num_heads, num_kv_heads, head_dim, tokens, expected):
    """A call takes a second thread where one was measured to pay, and stays on one where it did not, whatever
    its K/V bytes alone say (the old rule, one thread under 128 KiB, got the middle three wrong); one thread
    available is always one."""
    assert native_plan.thread_count(batch, num_heads, num_kv_heads, head_dim, tokens, 4, 2) == expected
    assert native_plan.thread_count(batch, num_heads, num_kv_heads, head_dim, tokens, 4, 1) == 1


@pytest.mark.parametrize("field", ["batch", "threads", "tokens"])
def test_thread_count_refuses_impossible_counts(field):
    """A batch or thread count below 1, or a negative token count, is a ValueError naming it."""
    args = dict(batch=1, num_heads=8, num_kv_heads=8, head_dim=64, tokens=16, element_size=4, threads=2)
    args[field] = -1
    with pytest.raises(ValueError, match=field):
        native_plan.thread_count(**args)


def test_tiny_work_stays_on_one_thread(threads, monkeypatch):
    """A call whose estimated work is under SECOND_THREAD_NS asks the kernel for one thread (waking a second costs
    more than it saves); above, for torch's thread count. Both match the reference."""
    calls = _recording_kernel(monkeypatch)
    threads(2)
    for lens in ([20], [600]):
        query, kc, vc, tables, keys, values = build(8, 2, 64, 16, lens, torch.float32)
        out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
        assert rel_err(out, reference(query, keys, values, lens)) < 1e-5
    assert [c[0] for c in calls] == [1, 2]


def test_a_call_too_big_for_the_caches_prefetches_and_matches(threads):
    """Two sequences of 4200 and 4153 tokens, 2 kv heads of 128 floats: 17 MB of K/V, past PREFETCH_WARM_MIN_BYTES,
    so every block's successor is prefetched while it is read, on the first call and on the same call repeated
    (shuffled blocks, a -1 padded table); GQA 8/2, 2 threads."""
    threads(2)
    lens = [4200, 4153]
    query, kc, vc, tables, keys, values = build(8, 2, 128, 16, lens, torch.float32)
    assert sum(lens) * 2 * 128 * 2 * 4 >= native_plan.PREFETCH_WARM_MIN_BYTES
    ref = reference(query, keys, values, lens)
    for _ in range(2):
        out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
        assert rel_err(out, ref) < 1e-5



def test_prefetch_rule_is_warm_only_for_the_same_kv_as_the_last_call():
    """The same key_cache as the last call (its K/V may still be cached): prefetch from PREFETCH_WARM_MIN_BYTES for
    grouped heads, from PREFETCH_WARM_MHA_MIN_BYTES (higher) for one query head per kv head; any other (the engine's
    next layer): from PREFETCH_COLD_MIN_BYTES, which is lower, grouped or not."""
    assert native_plan.prefetch_min_bytes(4096, 4096) == native_plan.PREFETCH_WARM_MIN_BYTES
    assert native_plan.prefetch_min_bytes(4096, 4096, grouped=False) == native_plan.PREFETCH_WARM_MHA_MIN_BYTES
    for grouped in (True, False):
        assert native_plan.prefetch_min_bytes(4096, 8192, grouped) == native_plan.PREFETCH_COLD_MIN_BYTES
        assert native_plan.prefetch_min_bytes(4096, 0, grouped) == native_plan.PREFETCH_COLD_MIN_BYTES  # no call before
    assert 0 <= native_plan.PREFETCH_COLD_MIN_BYTES < native_plan.PREFETCH_WARM_MIN_BYTES < native_plan.PREFETCH_WARM_MHA_MIN_BYTES


def record_prefetch_thresholds(monkeypatch) -> list[int]:
    """Wrap the loaded kernel so that each call's prefetch threshold (packed argument 18: the K/V bytes from which
    it prefetches) is appended to the returned list; the kernel still runs."""
    fn, seen = native._load(), []

    def record(args, scale):
        seen.append(memoryview(args).cast("q")[18])
        return fn(args, scale)

    monkeypatch.setitem(native._state, "fn", record)
    return seen


def test_a_repeated_call_hands_the_kernel_the_threshold_of_its_heads(monkeypatch, threads):
    """A call repeated on the same pool hands the kernel PREFETCH_WARM_MIN_BYTES when its heads are grouped (8/2)
    and PREFETCH_WARM_MHA_MIN_BYTES when they are not (4/4); each result matches the reference."""
    seen = record_prefetch_thresholds(monkeypatch)
    threads(1)
    lens = [37, 5]
    for num_heads, num_kv_heads, expected in ((8, 2, native_plan.PREFETCH_WARM_MIN_BYTES),
                                              (4, 4, native_plan.PREFETCH_WARM_MHA_MIN_BYTES)):
        query, kc, vc, tables, keys, values = build(num_heads, num_kv_heads, 32, 16, lens, torch.float32)
        for _ in range(2):
            out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
            assert rel_err(out, reference(query, keys, values, lens)) < 1e-5
        assert seen[-1] == expected


def test_layers_taking_turns_prefetch_as_cold_and_a_repeated_call_as_warm(monkeypatch, threads):
    """Two pools read in turn, as an engine step reads its layers, hand the kernel the cold threshold on every call;
    the same pool read again hands it the warm one. Every result (prefetching or not) matches the reference."""
    seen = record_prefetch_thresholds(monkeypatch)
    threads(1)
    lens = [37, 5, 70]
    layers = [build(4, 2, 32, 16, lens, torch.float32, seed=seed) for seed in (1, 2)]
    for layer in (0, 1, 0, 1, 1):
        query, kc, vc, tables, keys, values = layers[layer]
        out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
        assert rel_err(out, reference(query, keys, values, lens)) < 1e-5
    cold, warm = native_plan.PREFETCH_COLD_MIN_BYTES, native_plan.PREFETCH_WARM_MIN_BYTES
    assert seen[1:] == [cold, cold, cold, warm]  # the first call depends on what ran before it in this process
