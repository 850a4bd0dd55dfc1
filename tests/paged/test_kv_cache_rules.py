"""ContiguousKVCache's rules at their edges (the reference twin every paged result is checked against): sizes
named in its errors, the dtype it keeps, growth by doubling only when full, layer and length bounds; and the
default device."""

import pytest
import torch

from paged.kv_cache import ContiguousKVCache, default_device


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


def test_an_empty_update_writes_nothing_and_returns_the_history():
    """An update of no token (n = 0) is allowed: it returns the layer's keys and values as they are."""
    cache = ContiguousKVCache(1, 1, 2)
    cache.update(0, torch.arange(2), torch.ones(2, 1, 2), torch.ones(2, 1, 2))
    keys, values = cache.update(0, torch.arange(0), torch.zeros(0, 1, 2), torch.zeros(0, 1, 2))
    assert keys.shape == (2, 1, 2) and torch.equal(values, torch.ones(2, 1, 2))
