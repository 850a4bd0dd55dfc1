"""A fast path of paged/kv_cache.py, same result: a pool allocated in transparent huge pages
(`pool_zeros`). The engine takes it with a fast kernel (ModelRunner.fast), as it takes
write_kv(fast=True); the reference never does."""

from __future__ import annotations

import ctypes
import sys

import torch


# a pool at least this large is advised into transparent huge pages (pool_zeros)
HUGE_PAGE_BYTES = 2 << 20
_MADV_HUGEPAGE = 14  # Linux's madvise advice number


def _advise_huge_pages(t: torch.Tensor) -> bool:
    """madvise(MADV_HUGEPAGE) over the whole 4 KiB pages inside t's memory; True when the kernel
    took the advice."""
    start, end = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
    first, last = -(-start // 4096) * 4096, end // 4096 * 4096
    if last <= first:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first),
                            _MADV_HUGEPAGE) == 0
    except (OSError, AttributeError):  # no C library to ask, or no madvise in it
        return False


def pool_zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """torch.zeros(shape) for a KV pool, in huge pages where it pays.

    On Linux, a CPU pool of HUGE_PAGE_BYTES or more is first advised into 2 MiB pages (madvise
    MADV_HUGEPAGE, taken where transparent huge pages are "madvise" or "always"), then zeroed, which
    faults its pages in: attention reads blocks scattered over the whole pool, and with 4 KiB pages
    a large pool misses the TLB on nearly every block (bench kernels, B=64 x 2048 tokens, 8/2 heads,
    134 MB: 67-81% of the read bandwidth on 4 KiB pages, 90-98% on huge pages; the shipped model's
    13 MB pool: no difference). Elsewhere, or when the advice is refused, plain zeros.
    """
    t = torch.empty(shape, dtype=dtype, device=device)
    if (t.device.type == "cpu" and sys.platform.startswith("linux")
            and t.numel() * t.element_size() >= HUGE_PAGE_BYTES):
        _advise_huge_pages(t)
    return t.zero_()
