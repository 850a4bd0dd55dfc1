"""The fast paths of paged/kv_cache.py, same results: a pool allocated in transparent huge pages, and the K/V write
in one C call. The engine takes them with a fast kernel (ModelRunner.fast); the reference path never does."""

from __future__ import annotations

import ctypes
import sys

import torch

from ..attention_checks import check_write
from ..kv_cache import write_kv
from . import native_ops

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


def write_kv_fast(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  slot_mapping: torch.Tensor, validate: bool = True, pads: bool = True) -> None:
    """`paged.kv_cache.write_kv` (same arguments, checks and result) with the copy in one C call where it fits
    (native_ops.write_rows: CPU, contiguous caches, each row contiguous); elsewhere the reference's index_copy_."""
    if validate:
        check_write(key_cache, value_cache, key, value, slot_mapping, pads)
    slots = slot_mapping if slot_mapping.dtype == torch.long else slot_mapping.long()
    if pads:
        keep = slots >= 0
        if not bool(keep.all()):
            slots, key, value = slots[keep], key[keep], value[keep]
    if not native_ops.write_rows(key_cache, value_cache, key, value, slots):
        write_kv(key_cache, value_cache, key, value, slots, validate=False, pads=False)
