"""The pool in transparent huge pages (paged.kernels.kv_fast.pool_zeros): advised over exactly its whole pages,
still zeros; and the fast K/V write equals the reference write_kv."""

import pytest
import torch

from paged.kv_cache import KVCachePool, write_kv

pytestmark = pytest.mark.kernels


def test_a_large_pool_is_advised_into_huge_pages_and_starts_at_zero(monkeypatch):
    """pool_zeros (what KVCachePool allocates with): on Linux a CPU pool of HUGE_PAGE_BYTES or more is advised
    (madvise MADV_HUGEPAGE) over exactly the whole 4 KiB pages inside its memory, before its pages are touched;
    a smaller one is not; either way it holds zeros of the asked shape and dtype."""
    import sys

    from paged.kernels import kv_fast

    advised = []

    def record(t):
        advised.append((t.data_ptr(), t.numel() * t.element_size()))
        return True

    monkeypatch.setattr(kv_fast, "_advise_huge_pages", record)
    big = kv_fast.pool_zeros((64, 16, 8, 64), torch.float32, torch.device("cpu"))  # 2 MiB
    small = kv_fast.pool_zeros((2, 16, 2, 8), torch.float16, torch.device("cpu"))
    assert big.shape == (64, 16, 8, 64) and small.dtype == torch.float16
    assert not big.any() and not small.any()
    if sys.platform.startswith("linux"):
        assert advised == [(big.data_ptr(), 2 << 20)]
    else:
        assert advised == []
    pool = KVCachePool(1, 64, 16, 4, 64)  # 1 MiB each for K and V: no advice
    assert len(advised) == (1 if sys.platform.startswith("linux") else 0) and not pool.key_cache.any()


def test_huge_page_advice_covers_only_whole_pages_inside_the_tensor(monkeypatch):
    """_advise_huge_pages hands madvise the page-aligned interior of the tensor's bytes, never a byte outside."""
    import ctypes

    from paged.kernels import kv_fast

    calls = []

    class Libc:
        @staticmethod
        def madvise(addr, length, advice):
            calls.append((addr.value, length.value, advice))
            return 0

    monkeypatch.setattr(ctypes, "CDLL", lambda *args, **kwargs: Libc())
    storage = torch.empty(3 * 4096 // 4)
    t = storage[5:]  # starts 20 bytes past wherever the storage starts
    assert kv_fast._advise_huge_pages(t)
    (addr, length, advice), = calls
    start, end = t.data_ptr(), t.data_ptr() + t.numel() * 4
    assert advice == 14 and addr % 4096 == 0 and length % 4096 == 0 and length > 0
    assert start <= addr and addr + length <= end and addr - start < 4096 and end - (addr + length) < 4096
    assert not kv_fast._advise_huge_pages(torch.empty(100))  # no whole page inside: nothing asked
    assert len(calls) == 1


def test_fast_write_lands_where_the_reference_write_does():
    """write_kv(fast=True) (the C write where it fits) leaves the pool bit for bit as write_kv does, -1 rows
    skipped, and refuses a repeated slot as the reference does."""
    import pytest

    g = torch.Generator().manual_seed(0)
    slots = torch.tensor([5, -1, 0, 17, 9])
    key, value = torch.randn(5, 2, 8, generator=g), torch.randn(5, 2, 8, generator=g)
    pools = [KVCachePool(1, 6, 4, 2, 8, device="cpu") for _ in range(2)]
    write_kv(*pools[0].layer(0), key, value, slots)
    write_kv(*pools[1].layer(0), key, value, slots, fast=True)
    assert torch.equal(pools[0].key_cache, pools[1].key_cache) and torch.equal(pools[0].value_cache,
                                                                               pools[1].value_cache)
    assert pools[1].key_cache.abs().sum() > 0  # something was written
    with pytest.raises(ValueError, match="appears more than once"):
        write_kv(*pools[1].layer(0), key[:2], value[:2], torch.tensor([3, 3]), fast=True)
