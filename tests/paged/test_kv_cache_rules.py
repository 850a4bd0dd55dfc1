"""ContiguousKVCache's and KVCachePool's rules at their edges: sizes and names in their errors, the dtype and device
they keep, growth by doubling only when full, layer and length bounds, bytes and slots; and the default device."""

import pytest
import torch

from paged.kv_cache import ContiguousKVCache, KVCachePool, default_device

pytestmark = pytest.mark.article


def test_sizes_are_named_in_the_errors():
    """Each size must be an integer >= 1, named in the error; a cache over max_bytes is named ContiguousKVCache,
    at creation and when it grows."""
    for kwargs, name in (({"num_layers": 0}, "num_layers"), ({"num_kv_heads": 0}, "num_kv_heads"),
                         ({"head_dim": 0}, "head_dim"), ({"capacity": 0}, "capacity")):
        sizes = dict(num_layers=1, num_kv_heads=2, head_dim=4) | kwargs
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
            ContiguousKVCache(**sizes)
    with pytest.raises(ValueError, match=r"ContiguousKVCache of shape \[1, 16, 2, 4\]"):
        ContiguousKVCache(1, 2, 4, max_bytes=100)
    cache = ContiguousKVCache(1, 2, 4, capacity=2, max_bytes=2 * 2 * 2 * 4 * 4)  # exactly K + V of 2 tokens
    with pytest.raises(ValueError, match=r"ContiguousKVCache of shape \[1, 4, 2, 4\]"):
        cache.update(0, torch.arange(3), torch.zeros(3, 2, 4), torch.zeros(3, 2, 4))


def test_the_cache_keeps_its_own_dtype_and_device():
    """A float64 cache stores float32 keys and values as float64 on its device; the default is float32."""
    cache = ContiguousKVCache(1, 2, 4, dtype=torch.float64, device="cpu")
    assert (cache.keys.dtype, cache.values.dtype, cache.keys.device.type) == (torch.float64, torch.float64, "cpu")
    k, v = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    cache.update(0, torch.arange(3), k, v)
    keys, values = cache.get(0)
    assert torch.equal(keys, k.double()) and torch.equal(values, v.double())
    assert ContiguousKVCache(1, 2, 4).keys.dtype == torch.float32


def test_it_grows_by_doubling_only_when_full():
    """capacity 4 holds 4 tokens without growing; a 5th doubles it to 8, a 9th to 16; what was written stays."""
    cache = ContiguousKVCache(1, 1, 2, capacity=4)
    data = torch.randn(9, 1, 2)
    widths = []
    for n in (4, 5, 9):
        cache.update(0, torch.arange(n), data[:n], data[:n])
        widths.append(cache.keys.shape[1])
    assert widths == [4, 8, 16] and torch.equal(cache.get(0)[0], data)


def test_layer_and_length_bounds():
    """Layers are 0 .. num_layers - 1; truncate takes a length >= 0 (named in the error) and keeps that many."""
    cache = ContiguousKVCache(2, 1, 2)
    cache.update(1, torch.arange(3), torch.ones(3, 1, 2), torch.ones(3, 1, 2))
    with pytest.raises(ValueError):
        cache.get(2)
    with pytest.raises(ValueError, match="length must be an integer >= 0"):
        cache.truncate(-1)
    cache.truncate(0)
    assert cache.get(1)[0].shape[0] == 0


def test_default_device_is_cuda_when_there_is_one():
    """The default device: cuda when torch sees a GPU, else the CPU."""
    assert default_device() == torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("has_gpu, want", [(True, "cuda"), (False, "cpu")])
def test_default_device_follows_what_torch_sees(monkeypatch, has_gpu, want):
    """With torch told a GPU is there (or not), the default device is cuda (or the CPU), on any machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: has_gpu)
    assert default_device() == torch.device(want)


def test_an_empty_update_writes_nothing_and_returns_the_history():
    """An update of no token (n = 0) is allowed: it returns the layer's keys and values as they are."""
    cache = ContiguousKVCache(1, 1, 2)
    cache.update(0, torch.arange(2), torch.ones(2, 1, 2), torch.ones(2, 1, 2))
    keys, values = cache.update(0, torch.arange(0), torch.zeros(0, 1, 2), torch.zeros(0, 1, 2))
    assert keys.shape == (2, 1, 2) and torch.equal(values, torch.ones(2, 1, 2))


# --- KVCachePool: the paged pool --------------------------------------------------------------------------------------
def test_pool_sizes_and_name_in_its_errors():
    """Each of the pool's sizes is named in its error; a pool over max_bytes is named KVCachePool with its shape."""
    base = dict(num_layers=1, num_blocks=2, block_size=4, num_kv_heads=1, head_dim=2)
    for name in ("num_layers", "num_blocks", "num_kv_heads", "head_dim"):
        with pytest.raises(ValueError, match=f"^{name} must be an integer >= 1"):
            KVCachePool(**(base | {name: 0}))
    with pytest.raises(ValueError, match="block_size"):
        KVCachePool(**(base | {"block_size": 0}))
    with pytest.raises(ValueError, match=r"^KVCachePool of shape \[1, 2, 4, 1, 2\]"):
        KVCachePool(**base, max_bytes=100)


def test_pool_keeps_its_dtype_and_device():
    """The pool's K and V take the dtype and device asked for (the meta device shows a dropped device argument)."""
    pool = KVCachePool(2, 3, 4, 1, 2, dtype=torch.float64, device="meta")
    assert (pool.dtype, pool.device.type) == (torch.float64, "meta")
    for t in (pool.key_cache, pool.value_cache):
        assert (t.dtype, t.device.type, tuple(t.shape)) == (torch.float64, "meta", (2, 3, 4, 1, 2))


def test_pool_layer_bounds_and_views():
    """layer(i) takes 0 .. num_layers - 1 (named "layer" in the error) and gives views of that layer's K and V."""
    pool = KVCachePool(3, 2, 4, 1, 2, device="cpu")
    for bad in (-1, 3):
        with pytest.raises(ValueError, match=rf"^layer must be an integer in \[0, 2\], got {bad}"):
            pool.layer(bad)
    for i in (0, 2):
        k, v = pool.layer(i)
        k.fill_(i + 1), v.fill_(-(i + 1))
        assert bool((pool.key_cache[i] == i + 1).all()) and bool((pool.value_cache[i] == -(i + 1)).all())
    assert float(pool.key_cache[1].abs().sum()) == 0.0


def test_pool_sizes_in_bytes_and_slots():
    """num_slots = blocks x block_size; nbytes = K + V; bytes_per_block counts K and V of every layer in the dtype."""
    pool = KVCachePool(2, 3, 4, 5, 6, dtype=torch.float16, device="cpu")
    assert pool.num_slots == 12 and pool.nbytes == 2 * 2 * 3 * 4 * 5 * 6 * 2
    assert KVCachePool.bytes_per_block(2, 4, 5, 6, torch.float16) == 2 * 2 * 4 * 5 * 6 * 2
    assert KVCachePool.bytes_per_block(2, 4, 5, 6, torch.float64) == 2 * 2 * 4 * 5 * 6 * 8
    assert KVCachePool.bytes_per_block(2, 4, 5, 6) == 2 * 2 * 4 * 5 * 6 * 4


def test_contiguous_cache_keeps_its_device_and_grows_to_exactly_a_power_of_two():
    """A reference cache made on a device is there (meta); from capacity 4, 8 tokens grow it to 8, not 16."""
    meta = ContiguousKVCache(1, 2, 4, dtype=torch.float16, device="meta")
    assert {t.device.type for t in (meta.keys, meta.values)} == {"meta"} and meta.values.dtype == torch.float16
    cache = ContiguousKVCache(1, 1, 2, capacity=4)
    data = torch.randn(8, 1, 2)
    cache.update(0, torch.arange(8), data, data)
    assert cache.keys.shape[1] == 8 and torch.equal(cache.get(0)[0], data)
