"""Where K/V live: the paged pool (physical blocks) and the contiguous reference cache.

`KVCachePool` is the vLLM-style pool: one big tensor per layer, cut into `num_blocks` blocks of `block_size` token
slots. `ContiguousKVCache` is the reference every paged result is checked against: one sequence's K/V appended in
token order, like gpt-fast's KVCache.
"""

from __future__ import annotations

import ctypes
import math
import sys

import torch

from .addressing import check_block_size
from .checks import as_int
from .kernels import native_ops

# The most bytes one KVCachePool (or ContiguousKVCache) may hold unless told otherwise: a knob set by mistake must
# be refused up front, not discovered as an out-of-memory error (or a machine swapping) halfway through.
MAX_CACHE_BYTES = 16 << 30


def default_device() -> torch.device:
    """cuda when available, else cpu."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _positive_int(name: str, value) -> int:
    return as_int(value, name, 1)


def _device(device) -> torch.device:
    if device is None:
        return default_device()
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}") from None


def _float_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype (e.g. torch.float32), got {dtype!r}")
    return dtype


def _check_bytes(what: str, shape: tuple[int, ...], dtype: torch.dtype, max_bytes: int) -> None:
    """Refuse, before allocating, K and V of `shape` each that would hold more than max_bytes together."""
    need = 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if need > max_bytes:
        size = f"{need / 2**30:.1f} GiB" if need >= 2**30 else f"{need / 2**20:.1f} MiB"
        raise ValueError(f"{what} of shape {list(shape)} ({dtype}) would need {need:,} bytes ({size}) for K and V, "
                         f"more than the limit of {max_bytes:,} bytes "
                         f"(max_bytes, default MAX_CACHE_BYTES); make it smaller or raise max_bytes")


HUGE_PAGE_BYTES = 2 << 20  # a pool at least this large is advised into transparent huge pages (pool_zeros)
_MADV_HUGEPAGE = 14  # Linux's madvise advice number


def _advise_huge_pages(t: torch.Tensor) -> bool:
    """madvise(MADV_HUGEPAGE) over the whole 4 KiB pages inside t's memory; True when the kernel took the advice."""
    start, end = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
    first, last = -(-start // 4096) * 4096, end // 4096 * 4096
    if last <= first:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), _MADV_HUGEPAGE) == 0
    except (OSError, AttributeError):  # no C library to ask, or no madvise in it
        return False


def pool_zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """torch.zeros(shape) for a KV pool. On Linux, a CPU pool of HUGE_PAGE_BYTES or more is first advised into
    2 MiB pages (madvise MADV_HUGEPAGE, taken where transparent huge pages are "madvise" or "always"), then zeroed,
    which faults its pages in: attention reads blocks scattered over the whole pool, and with 4 KiB pages a large
    pool misses the TLB on nearly every block (bench kernels, B=64 x 2048 tokens, 8/2 heads, 134 MB: 67-81% of the
    read bandwidth on 4 KiB pages, 90-98% on huge pages; the shipped model's 13 MB pool: no difference). Elsewhere,
    or when the advice is refused, plain zeros."""
    t = torch.empty(shape, dtype=dtype, device=device)
    if t.device.type == "cpu" and sys.platform.startswith("linux") and t.numel() * t.element_size() >= HUGE_PAGE_BYTES:
        _advise_huge_pages(t)
    return t.zero_()


class KVCachePool:
    """The physical KV cache: `key_cache` / `value_cache` of shape
    [num_layers, num_blocks, block_size, num_kv_heads, head_dim], zero-initialised.

    Raises ValueError (before allocating anything) unless every size is an integer >= 1, dtype is a floating-point
    dtype, device names a device, and K + V fit in max_bytes."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
                 max_bytes: int = MAX_CACHE_BYTES) -> None:
        num_layers = _positive_int("num_layers", num_layers)
        num_blocks = _positive_int("num_blocks", num_blocks)
        block_size = check_block_size(block_size)
        num_kv_heads = _positive_int("num_kv_heads", num_kv_heads)
        head_dim = _positive_int("head_dim", head_dim)
        dtype, device = _float_dtype(dtype), _device(device)
        shape = (num_layers, num_blocks, block_size, num_kv_heads, head_dim)
        _check_bytes("KVCachePool", shape, dtype, _positive_int("max_bytes", max_bytes))
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.num_kv_heads, self.head_dim, self.dtype = num_kv_heads, head_dim, dtype
        self.device = device
        self.key_cache = pool_zeros(shape, dtype, self.device)  # zeros, in huge pages where it pays
        self.value_cache = pool_zeros(shape, dtype, self.device)
        # The per-layer views, made once: the engine asks for one layer's pair per layer per step.
        self._layers = [(self.key_cache[i], self.value_cache[i]) for i in range(num_layers)]

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views (key_cache, value_cache) of layer i, each [num_blocks, block_size, num_kv_heads, head_dim]."""
        if type(i) is int and 0 <= i < self.num_layers:  # the engine's calls: nothing to convert
            return self._layers[i]
        i = as_int(i, "layer")
        if not 0 <= i < self.num_layers:
            raise ValueError(f"layer {i} is outside [0, {self.num_layers})")
        return self.key_cache[i], self.value_cache[i]

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def nbytes(self) -> int:
        """Bytes held by key_cache + value_cache."""
        return 2 * self.key_cache.numel() * self.key_cache.element_size()

    @staticmethod
    def bytes_per_block(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int,
                        dtype: torch.dtype = torch.float32) -> int:
        """K and V bytes of one physical block across all layers."""
        return 2 * num_layers * block_size * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def check_write(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                slot_mapping: torch.Tensor) -> None:
    """The boundary checks of `write_kv` (ValueError naming the bad value); nothing is written."""
    for name, t in (("key_cache", key_cache), ("value_cache", value_cache), ("key", key), ("value", value),
                    ("slot_mapping", slot_mapping)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if key_cache.dim() != 4 or value_cache.shape != key_cache.shape:
        raise ValueError(f"key_cache/value_cache must both be [num_blocks, block_size, num_kv_heads, head_dim], "
                         f"got {tuple(key_cache.shape)} and {tuple(value_cache.shape)}")
    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    want = (num_kv_heads, head_dim)
    if key.dim() != 3 or tuple(key.shape[1:]) != want or value.shape != key.shape:
        raise ValueError(f"key/value must be [num_tokens, {num_kv_heads}, {head_dim}] to match the cache, got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")
    if slot_mapping.dim() != 1 or slot_mapping.numel() != key.shape[0]:
        raise ValueError(f"slot_mapping has {slot_mapping.numel()} entries but key/value have {key.shape[0]} rows: "
                         "one slot per token is required")
    if key.dtype != key_cache.dtype or value.dtype != value_cache.dtype:
        raise ValueError(f"dtype mismatch: key/value are {key.dtype}/{value.dtype}, cache is {key_cache.dtype}")
    if len({key_cache.device, value_cache.device, key.device, value.device, slot_mapping.device}) > 1:
        raise ValueError(f"device mismatch: key on {key.device}, value on {value.device}, slot_mapping on "
                         f"{slot_mapping.device}, key_cache on {key_cache.device}, value_cache on "
                         f"{value_cache.device}")
    if slot_mapping.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"slot_mapping must be an integer tensor, got {slot_mapping.dtype}")
    if slot_mapping.numel():
        num_slots = num_blocks * block_size
        bad = (slot_mapping < -1) | (slot_mapping >= num_slots)
        if bool(bad.any()):
            slot = int(slot_mapping[bad][0])
            raise ValueError(f"slot {slot} is outside the pool: slots are in [0, {num_slots}) "
                             f"(num_blocks {num_blocks} x block_size {block_size}), or -1 to skip")
        written = slot_mapping[slot_mapping >= 0].sort().values
        repeated = written[1:][written[1:] == written[:-1]]
        if repeated.numel():
            raise ValueError(f"slot {int(repeated[0])} appears more than once in slot_mapping: which token's K/V "
                             "would land there is undefined, so one write call takes each slot at most once")


def write_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             slot_mapping: torch.Tensor, validate: bool = True, pads: bool = True) -> None:
    """Write each token's K/V into one layer's cache at its slot.

    key_cache, value_cache: [num_blocks, block_size, num_kv_heads, head_dim] (modified in place)
    key, value:             [num_tokens, num_kv_heads, head_dim]
    slot_mapping:           [num_tokens] int; slot = physical_block_id * block_size + block_offset; -1 is skipped.
    Raises ValueError (nothing written) on mismatched shapes, dtypes, devices, slots outside the pool or a slot
    given twice. validate=False skips those checks (the engine's hot path, the bug lab). pads=False: the caller
    knows no slot is -1 (the engine's slots come through the checked address chain), so the search for -1 slots
    (two ops and a sync per layer) is skipped; with validate=True a -1 still raises ValueError.
    """
    if validate:
        check_write(key_cache, value_cache, key, value, slot_mapping)
        if not pads and slot_mapping.numel() and bool((slot_mapping < 0).any()):
            raise ValueError("pads=False, but slot_mapping holds -1 (padding): pass pads=True to skip those rows")
    slots = slot_mapping if slot_mapping.dtype == torch.long else slot_mapping.long()  # (.long() costs 0.5 us)
    if pads:
        keep = slots >= 0
        if not bool(keep.all()):
            slots, key, value = slots[keep], key[keep], value[keep]
    if native_ops.write_rows(key_cache, value_cache, key, value, slots):  # what the loop does, in one C call
        return
    for cache, rows in ((key_cache, key), (value_cache, value)):
        if cache.is_contiguous():  # a pool layer: as a flat [num_slots, num_kv_heads, head_dim] view, slot s is row s
            # (flatten of a contiguous tensor is always a view, so the copy lands in the cache; half the cost of
            # .view(-1, *cache.shape[2:]), on the engine's hot path: twice a layer a step)
            cache.flatten(0, 1).index_copy_(0, slots, rows)
        else:  # a strided cache cannot be viewed flat: address (block, offset) pairs instead
            cache.index_put_((slots // cache.shape[1], slots % cache.shape[1]), rows)


class ContiguousKVCache:
    """The reference: one sequence's K/V for every layer, stored in token order.

    keys / values: [num_layers, capacity, num_kv_heads, head_dim]; token i of layer l is simply keys[l, i].
    Grows by doubling, so no max length has to be guessed up front.
    """

    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None, capacity: int = 16,
                 max_bytes: int = MAX_CACHE_BYTES) -> None:
        """Raises ValueError unless the sizes and capacity are integers >= 1, dtype is floating-point and the
        cache fits in max_bytes (checked again whenever it grows)."""
        num_layers = _positive_int("num_layers", num_layers)
        num_kv_heads = _positive_int("num_kv_heads", num_kv_heads)
        head_dim = _positive_int("head_dim", head_dim)
        dtype, device = _float_dtype(dtype), _device(device)
        self.max_bytes = _positive_int("max_bytes", max_bytes)
        shape = (num_layers, _positive_int("capacity", capacity), num_kv_heads, head_dim)
        _check_bytes("ContiguousKVCache", shape, dtype, self.max_bytes)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * num_layers  # tokens written so far, per layer

    def _grow(self, needed: int) -> None:
        capacity = self.keys.shape[1]
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        _check_bytes("ContiguousKVCache", (self.keys.shape[0], capacity, *self.keys.shape[2:]), self.keys.dtype,
                     self.max_bytes)
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((old.shape[0], capacity, *old.shape[2:]))
            new[:, : old.shape[1]] = old
            setattr(self, name, new)

    def _layer(self, layer) -> int:
        layer = as_int(layer, "layer")
        if not 0 <= layer < len(self.lengths):
            raise ValueError(f"layer {layer} is outside [0, {len(self.lengths)})")
        return layer

    def update(self, layer: int, input_pos: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write key/value [n, num_kv_heads, head_dim] at token positions input_pos [n] of `layer`; return that
        layer's keys, values [length, num_kv_heads, head_dim] up to the furthest token written.
        Raises ValueError (nothing written) for a bad layer, non-integer, negative or repeated positions, shapes
        that do not match the cache, or growth past max_bytes."""
        layer = self._layer(layer)
        for name, t in (("input_pos", input_pos), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if input_pos.dtype == torch.bool or input_pos.is_floating_point() or input_pos.is_complex():
            raise ValueError(f"input_pos must be an integer tensor, got {input_pos.dtype}")
        want = (input_pos.numel(), *self.keys.shape[2:])
        if input_pos.dim() != 1 or tuple(key.shape) != want or value.shape != key.shape:
            raise ValueError(f"input_pos {tuple(input_pos.shape)}, key {tuple(key.shape)} and value "
                             f"{tuple(value.shape)} must be [n] and [n, num_kv_heads, head_dim] = {list(want)}")
        pos = input_pos.to(self.keys.device).long()
        if pos.numel() and int(pos.min()) < 0:
            raise ValueError(f"input_pos must be >= 0, got {int(pos.min())}")
        if pos.numel() > 1 and pos.unique().numel() != pos.numel():
            raise ValueError(f"input_pos repeats a position ({pos.tolist()[:16]}): which write wins is undefined")
        end = int(pos.max()) + 1 if pos.numel() else self.lengths[layer]
        self._grow(end)
        self.keys[layer].index_copy_(0, pos, key.to(self.keys.device, self.keys.dtype))
        self.values[layer].index_copy_(0, pos, value.to(self.values.device, self.values.dtype))
        self.lengths[layer] = max(self.lengths[layer], end)
        return self.get(layer)

    def get(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """keys, values of `layer` in token order: [length, num_kv_heads, head_dim] views."""
        layer = self._layer(layer)
        n = self.lengths[layer]
        return self.keys[layer, :n], self.values[layer, :n]

    @property
    def length(self) -> int:
        return min(self.lengths)

    def clone(self) -> "ContiguousKVCache":
        """An independent copy (a forked sequence's twin starts from its parent's history)."""
        twin = object.__new__(ContiguousKVCache)
        twin.keys, twin.values, twin.lengths = self.keys.clone(), self.values.clone(), list(self.lengths)
        twin.max_bytes = self.max_bytes
        return twin

    def truncate(self, length: int) -> None:
        """Forget every token at position >= length (used when a sequence is preempted and recomputed)."""
        length = as_int(length, "length", 0)
        self.lengths = [min(n, length) for n in self.lengths]
