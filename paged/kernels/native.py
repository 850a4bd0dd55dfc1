"""impl="native": the fused algorithm as a C kernel (native_decode.c next to this file), compiled on first use.

"fused" keeps PyTorch's ops and pays for them: each tile is copied out of the pool, copied again kv-major, and a
dozen ops are dispatched per tile. A C loop needs none of that. It reads every K and V row once, in place, and
keeps the online softmax (running max m, running sum l, rescaled accumulator acc) in registers and a small
scratch. What is left of the road to SDPA's speed is what a real kernel does: vector instructions (AVX2 + FMA, or
AVX-512, when the CPU has them), prefetching block j+1, whose address the block table already knows, while block j
is read, and (for a batch too small to keep every thread busy) cutting each context into partitions merged at the
end.

Building: the first call compiles the C file with the system's C compiler (`$CC`, else cc, gcc or clang) into a
shared library in a private cache folder (paged/kernels/native_build.py: how a library is checked before it is
loaded, so that a planted, truncated or garbage file is never run). The code is built for this CPU with
-march=native; an edit, another compiler or another machine builds anew. That takes about a second; later
processes load the cached library. With OpenMP (gcc) the kernel runs on torch's own OpenMP threads: the library is
loaded after torch, so `libgomp.so.1` resolves to the copy torch already loaded. Without OpenMP it uses pthreads.

No compiler, a failed or hung build, a library that will not load: `native_available()` is False, the call
raises RuntimeError saying why, and the engine's default falls back to "gather". CPU tensors only; K/V in float32,
float64, float16 or bfloat16 (sums in float32, or float64 for float64).

Memory safety: C does not check bounds, so the kernel checks what it is handed even with validate=False (as the bug
lab runs): a context_len outside 1..max_blocks * block_size or a physical_block_id outside the pool is refused and
reported, so the wrapper raises ValueError instead of reading foreign memory.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import subprocess
import threading
from typing import NamedTuple

import torch

from ..addressing import blocks_needed
from . import native_build

DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
# The shortest partition worth a work item of its own (vLLM's v2 decode uses 512-token partitions on GPUs).
MIN_PARTITION_TOKENS = 256
# When a second thread pays (thread_count): a call's one-thread kernel time, estimated from its K/V bytes, its FMAs
# (one per query head, token and dim, for q.K and for p.V) and its sequences, must reach SECOND_THREAD_NS. Fitted
# on a 2-core EPYC (AVX-512VL, 32 MiB L3), warm caches, by timing 1 against 2 threads interleaved (fastest of 21
# reps, load average 1.8-3.6) on 196 calls: B 1..32, 8/8 and 8/2 heads at d 64 and 128, the tiny model's 4/2 at
# d 32, 32-512 KiB of K/V. Beyond the ~7.6 us every call costs, one thread took 11.5 ns per KiB + 28 ns per 1000
# FMAs + 300 ns per sequence. Checked on a second sweep of 270 calls (16 KiB-1 MiB): of the 180 this rule gives
# two threads, two were > 3% faster on 163 and > 3% slower on 2 (a neighbour took the core); of the 90 it keeps on
# one, two would have been > 3% faster on 14, by 9% at most. The rule before (one thread under 128 KiB of K/V)
# kept 122 of them on one, 47 of which ran > 3% faster on two (in the first sweep, B=32 x 2 tokens of the tiny
# model: 0.92x; B=16 x 2 tokens at 8/2 d64: 0.87x); it gave two to B=1, 4/2 d32 x 256 tokens, 1.05x slower.
KV_BYTES_PER_NS = 89.0
FMAS_PER_NS = 36.0
SEQUENCE_NS = 300.0
SECOND_THREAD_NS = 4000.0
# Prefetching each next block while the kernel reads the current one (see prefetch_min_bytes) pays when the K/V come
# from L3 or DRAM and costs load slots when they are still in L1/L2. A call that reads other K/V than the last call
# (the engine: each layer its own pool, the other layers ran in between) finds them out of cache: it prefetches from
# PREFETCH_COLD_MIN_BYTES. A call that reads the same K/V again (a benchmark's repeated call) may find them cached:
# from PREFETCH_WARM_MIN_BYTES. Measured on a 2-core EPYC (32 MiB L3), thresholds 0 / 256 KiB / 1 MiB / 4 MiB
# interleaved in one process each. The shipped model's engine (1 thread, CPU s per generation, 9 reps, load 0.8-1.7):
# batch 32 (0.3-1.4 MiB a call) 1.18x / 1.25x / 1.10x / 1.00, batch 8 1.04x / 1.02x / 0.98x / 1.00, batch 1 (<= 40
# KiB) 1.01x / 0.99x / 0.98x / 1.00. `bench kernels`' data (2 threads, 31 reps in each impl order, B 1 and 4, ctx
# 64-2048, load 0.9-2.3), prefetching against not: after COLD_MB of other reads 1.03-2.5x on every call of 0.06-32
# MiB (0.95x on one of 64 MiB); repeating the same call (warm) 0.87-1.0x on every call of 0.06-2 MiB (0.87-0.94x on
# 8/8 heads of 1-2 MiB). From 4 MiB, warm, as before: 0.82-0.94x on 8/8 heads up to 16 MiB, 1.26-1.7x on the rest.
# Then, on a 2-core Xeon (AVX-512, a 300 MiB L3 shared with other machines), warm, not prefetching against
# prefetching, interleaved (up to 201 reps, load 1.7-3.9), by medians: 8/8 heads (MHA) 0.74-0.88x at 4 MiB,
# 0.85-0.95x at 8 MiB, 0.88-0.92x at 16 MiB (1 and 2 threads), 0.88-1.13x at 32 MiB; 8/2 heads (grouped) 0.90-0.93x at
# 4 MiB, 0.96-1.16x at 8 MiB, 1.06-1.12x at 16 MiB, 1.07x at 32 MiB. So a repeated call prefetches from 8 MiB when
# its heads are grouped (their 4 FMAs per K/V value leave time for the extra loads), from 32 MiB when not.
PREFETCH_COLD_MIN_BYTES = 0
PREFETCH_WARM_MIN_BYTES = 8 << 20  # grouped heads (GQA, MQA)
PREFETCH_WARM_MHA_MIN_BYTES = 32 << 20  # one query head per kv head

_lock = threading.Lock()
_state: dict[str, object] = {}  # "fn": the loaded C function and "lib" its library, or "error": why there is none
_last_kv = [0]  # key_cache.data_ptr() of the last call (a hint only: a race between threads just costs a prefetch)


def _load():
    """The C function paged_decode_packed, built and loaded once per process. Raises RuntimeError when it cannot
    be."""
    with _lock:
        if "fn" not in _state and "error" not in _state:
            try:
                lib = native_build.load_kernel()
                fn = getattr(lib, native_build.SYMBOL)
                fn.restype = ctypes.c_int64
                fn.argtypes = [ctypes.c_void_p, ctypes.c_double]  # the packed arguments (see native_decode), the scale
                _state["fn"], _state["lib"] = fn, lib
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                # Whatever went wrong, say so once and let callers fall back (the engine picks "gather").
                _state["error"] = str(exc) if isinstance(exc, RuntimeError) else f"impl='native': {exc!r}"
        if "error" in _state:
            raise RuntimeError(_state["error"])
        return _state["fn"]


def library() -> ctypes.CDLL:
    """The loaded C library (native_ops.py finds the model's small ops in it). Raises RuntimeError as _load."""
    _load()
    return _state["lib"]


def native_error() -> str | None:
    """Why the C kernel cannot run here (no compiler, a failed build), or None when it is loaded. The first call
    in a process may build it: about a second."""
    try:
        _load()
    except RuntimeError as err:
        return str(err)
    return None


def native_available() -> bool:
    """True when the C kernel is built (or can be, now) and loaded. The first call may take about a second."""
    return native_error() is None


def thread_count(batch: int, num_heads: int, num_kv_heads: int, head_dim: int, tokens: int, element_size: int,
                 threads: int) -> int:
    """The threads one call should run on: 1 when its estimated one-thread kernel time (see SECOND_THREAD_NS) is
    under SECOND_THREAD_NS, where waking and joining a second thread costs more than it saves; else `threads`.
    `tokens` is the block table's width in tokens (what a sequence may read), `element_size` the K/V's bytes per
    value. Raises ValueError for a count below 1 (threads, batch) or below 0 (the rest)."""
    if batch < 1 or threads < 1 or min(num_heads, num_kv_heads, head_dim, tokens, element_size) < 0:
        # (checked at once first: this runs on every decode call, where the loop below cost about 1 us)
        for name, value, low in (("batch", batch, 1), ("threads", threads, 1), ("num_heads", num_heads, 0),
                                 ("num_kv_heads", num_kv_heads, 0), ("head_dim", head_dim, 0), ("tokens", tokens, 0),
                                 ("element_size", element_size, 0)):
            if value < low:
                raise ValueError(f"thread_count: {name} must be >= {low}, got {value}")
    kv_bytes = batch * tokens * num_kv_heads * head_dim * 2 * element_size
    fmas = batch * tokens * num_heads * head_dim * 2
    estimate_ns = kv_bytes / KV_BYTES_PER_NS + fmas / FMAS_PER_NS + batch * SEQUENCE_NS
    return 1 if estimate_ns < SECOND_THREAD_NS else threads


def prefetch_min_bytes(key_ptr: int, last_key_ptr: int, grouped: bool = True) -> int:
    """K/V bytes from which a call prefetches each next block: when it reads the same key_cache (address `key_ptr`)
    as the last call did (`last_key_ptr`), whose K/V may still be in cache, PREFETCH_WARM_MIN_BYTES for grouped
    heads (num_heads > num_kv_heads) or PREFETCH_WARM_MHA_MIN_BYTES (grouped=False); else PREFETCH_COLD_MIN_BYTES
    (see there for the measurements)."""
    if key_ptr != last_key_ptr:
        return PREFETCH_COLD_MIN_BYTES
    return PREFETCH_WARM_MIN_BYTES if grouped else PREFETCH_WARM_MHA_MIN_BYTES


def caches_flushed() -> None:
    """Tell the rule that the K/V of the last call have left the caches (a benchmark's --cold flush ran since): the
    next call prefetches as on cold K/V even when it reads the same key_cache again."""
    _last_kv[0] = 0


@functools.lru_cache(maxsize=256)
def plan_work(batch: int, num_heads: int, num_kv_heads: int, max_blocks: int, block_size: int,
              threads: int) -> tuple[int, int]:
    """How to cut the work into equal items that the threads share evenly: (head_chunks, partition_blocks).

    Each sequence becomes the fewest items that balance: `per_seq` such that batch * per_seq is a multiple of
    `threads`, or at least 2 * threads (then a thread does at most one item more than another). Finer cuts only
    add per-item costs (measured on 2 cores, B=1: one item per thread was up to 1.2x faster than two). The cut:
    partitions of the context first (vLLM's v2 decode), each at least MIN_PARTITION_TOKENS long or the combine
    costs more than it saves; kv-head ranges only where the context is too short for two partitions, or where
    partitions cannot give enough items. A partition's thread reads whole blocks front to back, where with half the
    kv heads it reads half of each token's row and skips the other half, which the other core reads (and the
    hardware prefetcher fetches for both). Measured on a 2-core Xeon (warm, 400 interleaved reps, medians), two
    partitions against two kv-head halves: MHA 8/8, B=1 x 512 tokens, d64 and d128, 0.74-0.82x the time (B=3:
    0.93x); grouped 8/2, B=1 x 2048, 0.67-0.69x (d64) and 0.76-0.83x (d128); B=3 x 2048 0.60-0.85x; B=3 x 512 d128
    0.78-0.81x; B=1 x 1024 d64 0.93-0.99x. (Grouped heads used to be cut by kv heads first, to keep an item's
    queries and accumulators small; at 8 query heads of d128 those are 4 KiB, well inside L1.)"""
    per_seq = 1
    while threads > 1 and (batch * per_seq) % threads and batch * per_seq < 2 * threads:
        per_seq += 1
    if per_seq == 1:
        return 1, 0
    min_blocks = blocks_needed(MIN_PARTITION_TOKENS, block_size)

    def partition_blocks(parts: int) -> int:  # 0: the context is too short to cut into `parts`
        blocks = max(min_blocks, -(-max_blocks // parts))
        return 0 if blocks >= max_blocks else blocks

    if max_blocks < 2 * min_blocks:
        head_chunks = min(num_kv_heads, per_seq)
        return head_chunks, (partition_blocks(-(-per_seq // head_chunks)) if head_chunks < per_seq else 0)
    blocks = partition_blocks(per_seq)
    parts = -(-max_blocks // blocks) if blocks else 1
    return min(num_kv_heads, -(-per_seq // parts)), blocks


# paged_decode_packed's 19 arguments (native_decode.c's order): five from the plan (dtype code, threads, head_chunks,
# partition_blocks, int32 tables), six pointers (query, key_cache, value_cache, block_tables, context_lens, out), seven
# sizes (batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks) and prefetch_min_bytes. Packed
# as bytes, whose address ctypes hands the kernel: the plan's and the sizes' bytes are made once per plan, so a call
# packs only its pointers (0.2 us, against 0.7 us for an array of all 19). New bytes each call, not one buffer
# refilled: calls may run at once on several threads (the app serves each browser from a thread of its own).
_HEAD, _POINTERS, _TAIL = struct.Struct("5q"), struct.Struct("6q"), struct.Struct("8q")


# A short decode's kernel takes 10-30 us, and the Python around it was 8-12 us, most of it spent on what depends only
# on the call's shapes, dtypes and thread count: checks, thread_count, plan_work, packing the sizes. _plan works
# that out once per such key; a call then costs one dict lookup, the checks that depend on the tensors themselves
# (device, contiguity) and its pointers. (A test that changes a tunable such as SECOND_THREAD_NS, or plan_work
# itself, calls forget_plans() first.)
class _Plan(NamedTuple):
    compute: torch.dtype  # the query's and the output's dtype in the kernel: float64 for a float64 pool, else float32
    convert_query: bool  # the query arrives in another dtype
    long_tables: bool  # block_tables are neither int32 nor int64: converted to int64
    long_lens: bool  # context_lens are not int64: converted
    head: bytes  # the packed arguments before the pointers
    tails: tuple[bytes, bytes]  # ... after them: the sizes and prefetch_min_bytes, for cold and warm K/V
    empty: bool  # batch 0: nothing to run


_plans: dict[tuple, _Plan] = {}
MAX_PLANS = 4096  # an engine meets a new key per batch size and table width; past this many, start over


def forget_plans() -> None:
    """Drop every cached call plan: the next calls work theirs out again (after a tunable changed)."""
    _plans.clear()


def _check_cpu(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    for name, t in (("query", query), ("key_cache", key_cache), ("value_cache", value_cache)):
        if not t.is_cpu:
            raise ValueError(f"impl='native' runs on CPU tensors; {name} is on {t.device} (use 'triton' on CUDA)")


def _plan(query_shape, query_dtype, key_shape, key_dtype, value_shape, value_dtype, tables_shape, tables_dtype,
          lens_shape, lens_dtype, threads: int) -> _Plan:
    """Every check of native_decode that depends only on the arguments' shapes and dtypes (a key of _plans, in its
    order), and what follows from them and torch's thread count. Raises ValueError as native_decode."""
    code = DTYPE_CODES.get(key_dtype)
    if code is None or value_dtype != key_dtype:
        raise ValueError(f"impl='native' needs key_cache and value_cache of one dtype among "
                         f"{[str(d) for d in DTYPE_CODES]}; got {key_dtype} and {value_dtype}")
    if len(query_shape) != 3 or len(key_shape) != 4:
        raise ValueError(f"impl='native': query {tuple(query_shape)} must be [B, num_heads, head_dim] and key_cache "
                         f"{tuple(key_shape)} [num_blocks, block_size, num_kv_heads, head_dim]")
    batch, num_heads, head_dim = query_shape
    num_blocks, block_size, num_kv_heads, cache_head_dim = key_shape
    if value_shape != key_shape or cache_head_dim != head_dim or num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"impl='native': query {tuple(query_shape)}, key_cache {tuple(key_shape)} and "
                         f"value_cache {tuple(value_shape)} disagree (same head_dim, num_heads a multiple "
                         f"of num_kv_heads >= 1, K and V of one shape)")
    if len(tables_shape) != 2 or tables_shape[0] != batch or tuple(lens_shape) != (batch,):
        raise ValueError(f"block_tables {tuple(tables_shape)} and context_lens {tuple(lens_shape)} must have "
                         f"one row per query ({batch})")
    compute = torch.float64 if code == 1 else torch.float32
    max_blocks = tables_shape[1]
    if batch:
        threads = thread_count(batch, num_heads, num_kv_heads, head_dim, max_blocks * block_size, key_dtype.itemsize,
                               threads)
        head_chunks, partition_blocks = plan_work(batch, num_heads, num_kv_heads, max_blocks, block_size, threads)
    else:
        head_chunks, partition_blocks = 1, 0
    grouped = num_heads > num_kv_heads
    sizes = (batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks)
    # prefetch_min_bytes stays the rule, asked here for a key pointer unlike the last call's (cold) and like it (warm)
    tails = tuple(_TAIL.pack(*sizes, prefetch_min_bytes(1, last, grouped)) for last in (0, 1))
    return _Plan(compute, query_dtype != compute, tables_dtype not in (torch.int32, torch.int64),
                 lens_dtype != torch.int64,
                 _HEAD.pack(code, threads, head_chunks, partition_blocks, tables_dtype == torch.int32), tails,
                 batch == 0)


def _raise_status(status: int, tables: torch.Tensor, lens: torch.Tensor, num_blocks: int, block_size: int) -> None:
    """The kernel refused a call (status != 0): raise what its status says (tables [B, max_blocks], lens [B])."""
    if status == -1:
        raise MemoryError("impl='native' could not allocate its scratch memory")
    if status < -1:
        raise ValueError(f"every context_len must be in 1..{tables.shape[1] * block_size} (max_blocks * "
                         f"block_size); sequence {-2 - status} has {int(lens[-2 - status])} (all: {lens.tolist()})")
    seq = status - 1
    raise ValueError(f"sequence {seq}: its block_table {tables[seq].tolist()} holds a physical_block_id "
                     f"outside the pool (0..{num_blocks - 1}) within context_len {int(lens[seq])}")


def native_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                  block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Decode attention over the paged pool in C; returns [B, num_heads, head_dim] in float32 (float64 for a
    float64 pool). Shapes as `paged_attention_decode`. Raises ValueError for GPU tensors, an unsupported dtype,
    context_lens outside 1..max_blocks * block_size or a block id outside the pool; RuntimeError when the kernel
    cannot be built."""
    key = (query.shape, query.dtype, key_cache.shape, key_cache.dtype, value_cache.shape, value_cache.dtype,
           block_tables.shape, block_tables.dtype, context_lens.shape, context_lens.dtype, torch.get_num_threads())
    plan = _plans.get(key)
    if plan is None:
        _check_cpu(query, key_cache, value_cache)  # (the checks in their old order: devices first)
        plan = _plan(*key)
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    elif not (query.is_cpu and key_cache.is_cpu and value_cache.is_cpu):
        _check_cpu(query, key_cache, value_cache)
    fn = _state.get("fn") or _load()
    # The kernel reads int32 or int64 tables as they are, and checks every length and block id it uses. Each
    # conversion below runs only when needed: on a short context this wrapper costs as much as the kernel.
    q = query.to(plan.compute) if plan.convert_query else query
    q = q if q.is_contiguous() else q.contiguous()
    tables = block_tables.long() if plan.long_tables else block_tables
    tables = tables if tables.is_contiguous() else tables.contiguous()
    lens = context_lens.to(torch.int64) if plan.long_lens else context_lens
    lens = lens if lens.is_contiguous() else lens.contiguous()
    keys = key_cache if key_cache.is_contiguous() else key_cache.contiguous()  # pool layers already are
    values = value_cache if value_cache.is_contiguous() else value_cache.contiguous()
    out = torch.empty_like(q)  # [batch, num_heads, head_dim], compute dtype, contiguous (0.4 us less than torch.empty)
    if plan.empty:
        return out
    key_ptr = keys.data_ptr()
    warm = key_ptr == _last_kv[0]  # the same K/V as the last call: see prefetch_min_bytes
    _last_kv[0] = key_ptr
    status = fn(plan.head + _POINTERS.pack(q.data_ptr(), key_ptr, values.data_ptr(), tables.data_ptr(),
                                           lens.data_ptr(), out.data_ptr()) + plan.tails[warm], scale)
    if status:
        _raise_status(status, tables, lens, key_cache.shape[0], key_cache.shape[1])
    return out


class DecodeStep:
    """native_decode for every layer of one engine decode step, its Python cut to what changes per layer.

    An engine step calls the kernel once per layer with the same block tables, context lens and shapes; only the
    layer's pool and the queries change. So the pool (key_cache / value_cache of every layer, [num_layers,
    num_blocks, block_size, num_kv_heads, head_dim], contiguous, CPU), the tables [B, max_blocks] and lens [B] are
    checked, converted and planned once here, and each `step(layer, query)` checks the query [B, num_heads,
    head_dim] and hands the kernel that layer's pointers. Raises ValueError as native_decode (and for a pool that
    is not one contiguous CPU tensor each, a layer outside it, a query unlike the first); RuntimeError when the kernel
    cannot be built. Returns [B, num_heads, head_dim] in the query's dtype, as paged_attention_decode.
    """

    def __init__(self, query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                 block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> None:
        if (key_cache.dim() != 5 or value_cache.shape != key_cache.shape
                or not (key_cache.is_contiguous() and value_cache.is_contiguous())):
            raise ValueError(f"DecodeStep needs the whole pool, one contiguous [num_layers, num_blocks, block_size, "
                             f"num_kv_heads, head_dim] tensor each; got key_cache {tuple(key_cache.shape)}")
        _check_cpu(query, key_cache, value_cache)
        # (the layer's shape, and the tables and lens as the kernel will read them: tables on the pool's device)
        tables = block_tables if block_tables.is_cpu else block_tables.cpu()
        lens = context_lens if context_lens.is_cpu else context_lens.cpu()
        self.plan = plan = _plan(query.shape, query.dtype, key_cache.shape[1:], key_cache.dtype,
                                 value_cache.shape[1:], value_cache.dtype, tables.shape, tables.dtype, lens.shape,
                                 lens.dtype, torch.get_num_threads())
        self.tables = (tables.long() if plan.long_tables else tables).contiguous()
        self.lens = (lens.to(torch.int64) if plan.long_lens else lens).contiguous()
        self.key_cache, self.value_cache, self.scale = key_cache, value_cache, scale  # (kept alive: we hold pointers)
        self.query_shape, self.query_dtype, self.num_layers = query.shape, query.dtype, key_cache.shape[0]
        self.layer_bytes = key_cache.stride(0) * key_cache.element_size()  # from one layer's K (or V) to the next
        self.pointers = (key_cache.data_ptr(), value_cache.data_ptr(), self.tables.data_ptr(), self.lens.data_ptr())
        self.fn = _state.get("fn") or _load()

    def __call__(self, layer: int, query: torch.Tensor) -> torch.Tensor:
        """Decode attention of `layer` for query [B, num_heads, head_dim] (this step's tables and lens)."""
        if type(layer) is not int or not 0 <= layer < self.num_layers:  # a pointer is computed from it: check
            raise ValueError(f"layer {layer!r} is outside [0, {self.num_layers})")
        if query.shape != self.query_shape or query.dtype != self.query_dtype or not query.is_cpu:
            raise ValueError(f"DecodeStep was prepared for queries {tuple(self.query_shape)} {self.query_dtype} on "
                             f"CPU; got {tuple(query.shape)} {query.dtype} on {query.device}")
        plan = self.plan
        if plan.empty:
            return query.new_empty(query.shape)
        q = query.to(plan.compute) if plan.convert_query else query
        q = q if q.is_contiguous() else q.contiguous()
        out = torch.empty_like(q)
        key_base, value_base, tables_ptr, lens_ptr = self.pointers
        key_ptr = key_base + layer * self.layer_bytes
        warm = key_ptr == _last_kv[0]  # (an engine's layers take turns: cold, but for a one-layer model)
        _last_kv[0] = key_ptr
        status = self.fn(plan.head + _POINTERS.pack(q.data_ptr(), key_ptr, value_base + layer * self.layer_bytes,
                                                    tables_ptr, lens_ptr, out.data_ptr()) + plan.tails[warm],
                         self.scale)
        if status:
            _raise_status(status, self.tables, self.lens, self.key_cache.shape[1], self.key_cache.shape[2])
        return out if plan.compute == self.query_dtype else out.to(self.query_dtype)

    def attend(self, query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> torch.Tensor:
        """`self(layer, query)` for the layer whose views key_cache, value_cache [num_blocks, block_size,
        num_kv_heads, head_dim] are (paged_attention_decode's call). Raises ValueError for views of another pool."""
        layer, rest = divmod(key_cache.data_ptr() - self.pointers[0], self.layer_bytes)
        if rest or value_cache.data_ptr() != self.pointers[1] + layer * self.layer_bytes:
            raise ValueError("DecodeStep: key_cache and value_cache are not one layer of the pool it was prepared for")
        return self(layer, query)
