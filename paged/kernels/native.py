"""impl="native": the fused algorithm as a C kernel (native_decode.c), compiled on first use.

"fused" keeps PyTorch's ops and pays for them: each tile is copied out of the pool, copied again
kv-major, and a dozen ops are dispatched per tile. A C loop reads every K and V row once, in place,
and keeps the online softmax (running max m, running sum l, rescaled accumulator acc) in registers
and a small scratch. The rest of the road to SDPA's speed is what a real kernel does: vector
instructions (AVX2 + FMA, or AVX-512), prefetching block j+1 (the block table knows its address)
while block j is read, and, for a batch too small to keep every thread busy, cutting each context
into partitions merged at the end (the rules: native_plan.py).

Building: the first call compiles the C file with `$CC`, else cc, gcc or clang, into a shared
library in a private cache folder (native_build.py: how a library is checked before it is loaded,
so a planted, truncated or garbage file never runs), with -march=native; an edit, another compiler
or another machine builds anew (about a second; later processes load the cached library). With
OpenMP (gcc) the kernel runs on torch's own OpenMP threads: the library is loaded after torch, so
`libgomp.so.1` resolves to torch's copy. Without OpenMP it uses pthreads.

No compiler, a failed or hung build, a library that will not load: `native_available()` is False,
the call raises RuntimeError saying why, and the engine's default falls back to "gather". CPU
tensors only; K/V in float32, float64, float16 or bfloat16 (sums in float32, float64 for float64).

Memory safety: C does not check bounds, so the kernel checks what it is handed even with
validate=False (as the bug lab runs): a context_len outside 1..max_blocks * block_size or a
physical_block_id outside the pool is refused, and the wrapper raises ValueError instead of reading
foreign memory.
"""

from __future__ import annotations

import ctypes
import struct
import subprocess
import threading
from typing import NamedTuple

import torch

from . import native_build, native_plan

DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}

_lock = threading.Lock()
# "fn": the loaded C function and "lib" its library, or "error": why there is none
_state: dict[str, object] = {}
# key_cache.data_ptr() of the last call (a hint only: a race between threads just costs a prefetch)
_last_kv = [0]


def _load():
    """The C function paged_decode_packed, built and loaded once per process.

    Raises: RuntimeError if it cannot be built or loaded.
    """
    with _lock:
        if "fn" not in _state and "error" not in _state:
            try:
                lib = native_build.load_kernel()
                fn = getattr(lib, native_build.SYMBOL)
                fn.restype = ctypes.c_int64
                # the packed arguments (see native_decode), the scale
                fn.argtypes = [ctypes.c_void_p, ctypes.c_double]
                _state["fn"], _state["lib"] = fn, lib
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
                # Whatever went wrong, say so once and let callers fall back (the engine: "gather").
                _state["error"] = (str(exc) if isinstance(exc, RuntimeError)
                                   else f"impl='native': {exc!r}")
        if "error" in _state:
            raise RuntimeError(_state["error"])
        return _state["fn"]


def library() -> ctypes.CDLL:
    """The loaded C library (native_ops.py finds the model's small ops in it).

    Raises: RuntimeError if it cannot be built or loaded.
    """
    _load()
    return _state["lib"]


def native_error() -> str | None:
    """Why the C kernel cannot run here (no compiler, a failed build), or None when it is loaded.

    The first call in a process may build it: about a second.
    """
    try:
        _load()
    except RuntimeError as err:
        return str(err)
    return None


def native_available() -> bool:
    """True when the C kernel is built (or can be, now) and loaded; the first call may take ~1 s."""
    return native_error() is None


def caches_flushed() -> None:
    """Tell the prefetch rule that the last call's K/V left the caches (a benchmark's --cold flush).

    The next call then prefetches as on cold K/V even when it reads the same key_cache again.
    """
    _last_kv[0] = 0


# paged_decode_packed's 19 arguments (native_decode.c's order): five from the plan (dtype code,
# threads, head_chunks, partition_blocks, int32 tables), six pointers (query, key_cache,
# value_cache, block_tables, context_lens, out), seven sizes (batch, num_heads, num_kv_heads,
# head_dim, block_size, max_blocks, num_blocks) and prefetch_min_bytes. Packed as bytes, whose
# address ctypes hands the kernel: the plan's and the sizes' bytes are made once per plan, so a call
# packs only its pointers (0.2 us, against 0.7 us for an array of all 19). New bytes each call, not
# one buffer refilled: calls may run at once on several threads (the app serves each browser from a
# thread of its own).
_HEAD, _POINTERS, _TAIL = struct.Struct("5q"), struct.Struct("6q"), struct.Struct("8q")


# A short decode's kernel takes 10-30 us, and the Python around it was 8-12 us, most of it on what
# depends only on the call's shapes, dtypes and thread count: checks, thread_count, plan_work,
# packing the sizes. _plan works that out once per such key; a call then costs one dict lookup, the
# checks that depend on the tensors themselves (device, contiguity) and its pointers. (A test that
# changes a tunable such as SECOND_THREAD_NS, or plan_work itself, calls forget_plans() first.)
class _Plan(NamedTuple):
    compute: torch.dtype  # the query's and output's dtype in the kernel: float64 for a float64 pool
    convert_query: bool  # the query arrives in another dtype
    long_tables: bool  # block_tables are neither int32 nor int64: converted to int64
    long_lens: bool  # context_lens are not int64: converted
    head: bytes  # the packed arguments before the pointers
    tails: tuple[bytes, bytes]  # ... after them: sizes, prefetch_min_bytes; cold and warm K/V
    empty: bool  # batch 0: nothing to run


_plans: dict[tuple, _Plan] = {}
MAX_PLANS = 4096  # an engine meets a new key per batch size and table width; past this, start over


def forget_plans() -> None:
    """Drop every cached call plan: the next calls work theirs out again (a tunable changed)."""
    _plans.clear()


def _check_cpu(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor) -> None:
    for name, t in (("query", query), ("key_cache", key_cache), ("value_cache", value_cache)):
        if not t.is_cpu:
            raise ValueError(f"impl='native' runs on CPU tensors; {name} is on {t.device} "
                             f"(use 'triton' on CUDA)")


def _plan(query_shape, query_dtype, key_shape, key_dtype, value_shape, value_dtype, tables_shape,
          tables_dtype, lens_shape, lens_dtype, threads: int) -> _Plan:
    """native_decode's checks that depend only on shapes and dtypes (a key of _plans, in its order),
    and what follows from them and torch's thread count.

    Raises: ValueError as native_decode.
    """
    code = DTYPE_CODES.get(key_dtype)
    if code is None or value_dtype != key_dtype:
        raise ValueError(f"impl='native' needs key_cache and value_cache of one dtype among "
                         f"{[str(d) for d in DTYPE_CODES]}; got {key_dtype} and {value_dtype}")
    if len(query_shape) != 3 or len(key_shape) != 4:
        raise ValueError(f"impl='native': query {tuple(query_shape)} must be [B, num_heads, "
                         f"head_dim] and key_cache "
                         f"{tuple(key_shape)} [num_blocks, block_size, num_kv_heads, head_dim]")
    batch, num_heads, head_dim = query_shape
    num_blocks, block_size, num_kv_heads, cache_head_dim = key_shape
    if (value_shape != key_shape or cache_head_dim != head_dim or num_kv_heads < 1
            or num_heads % num_kv_heads):
        raise ValueError(f"impl='native': query {tuple(query_shape)}, key_cache {tuple(key_shape)} "
                         f"and value_cache {tuple(value_shape)} disagree (same head_dim, "
                         f"num_heads a multiple of num_kv_heads >= 1, K and V of one shape)")
    if len(tables_shape) != 2 or tables_shape[0] != batch or tuple(lens_shape) != (batch,):
        raise ValueError(f"block_tables {tuple(tables_shape)} and context_lens "
                         f"{tuple(lens_shape)} must have one row per query ({batch})")
    compute = torch.float64 if code == 1 else torch.float32
    max_blocks = tables_shape[1]
    if batch:
        threads = native_plan.thread_count(batch, num_heads, num_kv_heads, head_dim,
                                           max_blocks * block_size, key_dtype.itemsize, threads)
        head_chunks, partition_blocks = native_plan.plan_work(batch, num_heads, num_kv_heads,
                                                              max_blocks, block_size, threads)
    else:
        head_chunks, partition_blocks = 1, 0
    grouped = num_heads > num_kv_heads
    sizes = (batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks)
    # prefetch_min_bytes stays the rule, asked for a key pointer unlike the last call's (cold) and
    # like it (warm)
    tails = tuple(_TAIL.pack(*sizes, native_plan.prefetch_min_bytes(1, last, grouped))
                  for last in (0, 1))
    return _Plan(compute, query_dtype != compute, tables_dtype not in (torch.int32, torch.int64),
                 lens_dtype != torch.int64,
                 _HEAD.pack(code, threads, head_chunks, partition_blocks,
                            tables_dtype == torch.int32), tails,
                 batch == 0)


def _raise_status(status: int, tables: torch.Tensor, lens: torch.Tensor, num_blocks: int,
                  block_size: int) -> None:
    """Raise what the kernel's refusal (status != 0) says; tables [B, max_blocks], lens [B].

    Raises: MemoryError if the scratch could not be allocated, else ValueError.
    """
    if status == -1:
        raise MemoryError("impl='native' could not allocate its scratch memory")
    if status < -1:
        raise ValueError(f"every context_len must be in 1..{tables.shape[1] * block_size} "
                         f"(max_blocks * block_size); sequence {-2 - status} has "
                         f"{int(lens[-2 - status])} (all: {lens.tolist()})")
    seq = status - 1
    raise ValueError(f"sequence {seq}: its block_table {tables[seq].tolist()} holds a "
                     f"physical_block_id outside the pool (0..{num_blocks - 1}) within context_len "
                     f"{int(lens[seq])}")


def native_decode(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                  block_tables: torch.Tensor, context_lens: torch.Tensor,
                  scale: float) -> torch.Tensor:
    """Decode attention over the paged pool in C: [B, num_heads, head_dim], float32 (float64 pool:
    float64). Shapes as `paged_attention_decode`.

    Raises: ValueError for GPU tensors, an unsupported dtype, a context_len outside
    1..max_blocks * block_size or a block id outside the pool; RuntimeError if it cannot be built.
    """
    key = (query.shape, query.dtype, key_cache.shape, key_cache.dtype, value_cache.shape,
           value_cache.dtype, block_tables.shape, block_tables.dtype, context_lens.shape,
           context_lens.dtype, torch.get_num_threads())
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
    # The kernel reads int32 or int64 tables as they are, and checks every length and block id it
    # uses. Each conversion below runs only when needed: on a short context this wrapper costs as
    # much as the kernel.
    q = query.to(plan.compute) if plan.convert_query else query
    q = q if q.is_contiguous() else q.contiguous()
    tables = block_tables.long() if plan.long_tables else block_tables
    tables = tables if tables.is_contiguous() else tables.contiguous()
    lens = context_lens.to(torch.int64) if plan.long_lens else context_lens
    lens = lens if lens.is_contiguous() else lens.contiguous()
    keys = key_cache if key_cache.is_contiguous() else key_cache.contiguous()  # pool layers are
    values = value_cache if value_cache.is_contiguous() else value_cache.contiguous()
    # [batch, num_heads, head_dim], compute dtype, contiguous (0.4 us less than torch.empty)
    out = torch.empty_like(q)
    if plan.empty:
        return out
    key_ptr = keys.data_ptr()
    warm = key_ptr == _last_kv[0]  # the same K/V as the last call: see prefetch_min_bytes
    _last_kv[0] = key_ptr
    status = fn(plan.head + _POINTERS.pack(q.data_ptr(), key_ptr, values.data_ptr(),
                                           tables.data_ptr(), lens.data_ptr(), out.data_ptr())
                + plan.tails[warm], scale)
    if status:
        _raise_status(status, tables, lens, key_cache.shape[0], key_cache.shape[1])
    return out


class DecodeStep:
    """native_decode for every layer of one engine decode step, its Python cut to what changes.

    A step calls the kernel once per layer with the same tables, lens and shapes; only the layer's
    pool and the queries change. So the pool (key_cache / value_cache of every layer, [num_layers,
    num_blocks, block_size, num_kv_heads, head_dim], contiguous, CPU), the tables [B, max_blocks]
    and lens [B] are checked, converted and planned once here; each `step(layer, query)` checks the
    query [B, num_heads, head_dim] and hands the kernel that layer's pointers. Returns [B,
    num_heads, head_dim] in the query's dtype, as paged_attention_decode.
    Raises: ValueError as native_decode, and for a pool that is not one contiguous CPU tensor each,
    a layer outside it or a query unlike the first; RuntimeError if the kernel cannot be built.
    """

    def __init__(self, query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                 block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> None:
        if (key_cache.dim() != 5 or value_cache.shape != key_cache.shape
                or not (key_cache.is_contiguous() and value_cache.is_contiguous())):
            raise ValueError(f"DecodeStep needs the whole pool, one contiguous [num_layers, "
                             f"num_blocks, block_size, num_kv_heads, head_dim] tensor each; got "
                             f"key_cache {tuple(key_cache.shape)}")
        _check_cpu(query, key_cache, value_cache)
        # (the layer's shape; the tables and lens as the kernel reads them, on the pool's device)
        tables = block_tables if block_tables.is_cpu else block_tables.cpu()
        lens = context_lens if context_lens.is_cpu else context_lens.cpu()
        self.plan = plan = _plan(query.shape, query.dtype, key_cache.shape[1:], key_cache.dtype,
                                 value_cache.shape[1:], value_cache.dtype, tables.shape,
                                 tables.dtype, lens.shape, lens.dtype, torch.get_num_threads())
        self.tables = (tables.long() if plan.long_tables else tables).contiguous()
        self.lens = (lens.to(torch.int64) if plan.long_lens else lens).contiguous()
        # (kept alive: we hold pointers)
        self.key_cache, self.value_cache, self.scale = key_cache, value_cache, scale
        self.query_shape, self.query_dtype, self.num_layers = (query.shape, query.dtype,
                                                               key_cache.shape[0])
        # from one layer's K (or V) to the next
        self.layer_bytes = key_cache.stride(0) * key_cache.element_size()
        self.pointers = (key_cache.data_ptr(), value_cache.data_ptr(), self.tables.data_ptr(),
                         self.lens.data_ptr())
        self.fn = _state.get("fn") or _load()

    def __call__(self, layer: int, query: torch.Tensor) -> torch.Tensor:
        """Decode attention of `layer` for query [B, num_heads, head_dim], this step's tables, lens.

        Raises: ValueError for a layer outside the pool or a query unlike the first.
        """
        if type(layer) is not int or not 0 <= layer < self.num_layers:  # a pointer comes from it
            raise ValueError(f"layer {layer!r} is outside [0, {self.num_layers})")
        if query.shape != self.query_shape or query.dtype != self.query_dtype or not query.is_cpu:
            raise ValueError(f"DecodeStep was prepared for queries {tuple(self.query_shape)} "
                             f"{self.query_dtype} on CPU; got {tuple(query.shape)} {query.dtype} "
                             f"on {query.device}")
        plan = self.plan
        if plan.empty:
            return query.new_empty(query.shape)
        q = query.to(plan.compute) if plan.convert_query else query
        q = q if q.is_contiguous() else q.contiguous()
        out = torch.empty_like(q)
        key_base, value_base, tables_ptr, lens_ptr = self.pointers
        key_ptr = key_base + layer * self.layer_bytes
        warm = key_ptr == _last_kv[0]  # (an engine's layers take turns: cold, but for one layer)
        _last_kv[0] = key_ptr
        status = self.fn(plan.head + _POINTERS.pack(q.data_ptr(), key_ptr,
                                                    value_base + layer * self.layer_bytes,
                                                    tables_ptr, lens_ptr, out.data_ptr())
                         + plan.tails[warm], self.scale)
        if status:
            _raise_status(status, self.tables, self.lens, self.key_cache.shape[1],
                          self.key_cache.shape[2])
        return out if plan.compute == self.query_dtype else out.to(self.query_dtype)

    def attend(self, query: torch.Tensor, key_cache: torch.Tensor,
               value_cache: torch.Tensor) -> torch.Tensor:
        """`self(layer, query)` for the layer whose views key_cache, value_cache [num_blocks,
        block_size, num_kv_heads, head_dim] are (paged_attention_decode's call).

        Raises: ValueError for views of another pool.
        """
        layer, rest = divmod(key_cache.data_ptr() - self.pointers[0], self.layer_bytes)
        if rest or value_cache.data_ptr() != self.pointers[1] + layer * self.layer_bytes:
            raise ValueError("DecodeStep: key_cache and value_cache are not one layer of the pool "
                             "it was prepared for")
        return self(layer, query)
