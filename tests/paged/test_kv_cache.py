"""The paged pool, write_kv and the contiguous reference cache."""

import pytest
import torch

from paged.addressing import locate, slot_mapping
from paged.kv_cache import ContiguousKVCache, KVCachePool, write_kv

pytestmark = pytest.mark.article


def test_pool_shapes_and_layer_views():
    """key_cache/value_cache are [num_layers, num_blocks, block_size, num_kv_heads, head_dim]; layer(i) is a view."""
    pool = KVCachePool(3, 10, 4, 2, 8, device="cpu")
    assert pool.key_cache.shape == (3, 10, 4, 2, 8) and pool.value_cache.shape == (3, 10, 4, 2, 8)
    k, v = pool.layer(1)
    k.fill_(1.0)
    assert pool.key_cache[1].eq(1).all() and pool.key_cache[0].eq(0).all() and pool.key_cache[2].eq(0).all()
    assert pool.nbytes == 2 * 3 * 10 * 4 * 2 * 8 * 4
    assert pool.nbytes == 10 * KVCachePool.bytes_per_block(3, 4, 2, 8)


@pytest.mark.parametrize("kwargs, name", [
    (dict(num_layers=0), "num_layers"), (dict(num_blocks=0), "num_blocks"), (dict(block_size=0), "block_size"),
    (dict(num_kv_heads=0), "num_kv_heads"), (dict(head_dim=0), "head_dim"),
])
def test_pool_rejects_bad_sizes(kwargs, name):
    """Every size must be >= 1, and the error names it."""
    args = dict(num_layers=1, num_blocks=4, block_size=4, num_kv_heads=1, head_dim=4) | kwargs
    with pytest.raises(ValueError, match=name):
        KVCachePool(**args, device="cpu")


def test_write_kv_lands_where_locate_reads():
    """For every token written, the write slot is the address locate() gives for reading it."""
    pool = KVCachePool(1, 12, 4, 2, 8, device="cpu")
    kc, vc = pool.layer(0)
    table = [7, 2, 9]
    key, value = torch.randn(10, 2, 8), torch.randn(10, 2, 8)
    write_kv(kc, vc, key, value, slot_mapping(table, 0, 10, 4))
    for i in range(10):
        a = locate(i, table, 4)
        assert torch.equal(kc[a.physical_block_id, a.block_offset], key[i])
        assert torch.equal(vc[a.physical_block_id, a.block_offset], value[i])
        assert torch.equal(kc.reshape(-1, 2, 8)[a.slot], key[i])
    untouched = [b for b in range(12) if b not in table]
    assert kc[untouched].eq(0).all(), "write_kv touched blocks outside the table"


def test_write_kv_skips_padding_slots():
    """slot -1 is skipped: the padded rows are written nowhere."""
    pool = KVCachePool(1, 4, 2, 1, 4, device="cpu")
    kc, vc = pool.layer(0)
    key = torch.arange(12.0).reshape(3, 1, 4) + 1
    write_kv(kc, vc, key, key.clone(), torch.tensor([5, -1, 0]))
    flat = kc.reshape(-1, 1, 4)
    assert torch.equal(flat[5], key[0]) and torch.equal(flat[0], key[2])
    assert int((flat != 0).any(dim=(1, 2)).sum()) == 2


@pytest.mark.parametrize("mutate, msg", [
    (lambda k, v, s: (k, v, torch.tensor([0, 8, 1])), "outside the pool"),
    (lambda k, v, s: (k, v, torch.tensor([0, -2, 1])), "outside the pool"),
    (lambda k, v, s: (k, v, torch.tensor([0, 1])), "one slot per token"),
    (lambda k, v, s: (k[:2], v[:2], s), "one slot per token"),
    (lambda k, v, s: (k.double(), v.double(), s), "dtype"),
    (lambda k, v, s: (k[..., :3], v[..., :3], s), "key/value must be"),
    (lambda k, v, s: (k, v[:, :, :3], s), "key/value must be"),
    (lambda k, v, s: (k, v, s.float()), "integer"),
])
def test_write_kv_rejects_and_changes_nothing(mutate, msg):
    """Bad slots, row counts, dtypes or shapes raise ValueError and leave the pool untouched."""
    pool = KVCachePool(1, 4, 2, 1, 4, device="cpu")
    kc, vc = pool.layer(0)
    kc.normal_(), vc.normal_()
    before = (kc.clone(), vc.clone())
    key, value, slots = mutate(torch.randn(3, 1, 4), torch.randn(3, 1, 4), torch.tensor([0, 3, 7]))
    with pytest.raises(ValueError, match=msg):
        write_kv(kc, vc, key, value, slots)
    assert torch.equal(kc, before[0]) and torch.equal(vc, before[1])


def test_contiguous_cache_appends_in_token_order_and_grows():
    """ContiguousKVCache stores token i at row i, grows past its capacity, and truncates for recompute."""
    cache = ContiguousKVCache(2, 1, 4, device="cpu", capacity=2)
    k = torch.randn(7, 1, 4)
    cache.update(0, torch.arange(0, 5), k[:5], -k[:5])
    keys, values = cache.update(0, torch.tensor([5, 6]), k[5:], -k[5:])
    assert torch.equal(keys, k) and torch.equal(values, -k)
    assert cache.lengths == [7, 0] and cache.length == 0
    cache.truncate(3)
    assert cache.get(0)[0].shape[0] == 3


def test_contiguous_cache_clone_is_independent():
    """A clone holds the same history, and writing to it leaves the original untouched."""
    cache = ContiguousKVCache(1, 1, 4, device="cpu")
    k = torch.randn(3, 1, 4)
    cache.update(0, torch.arange(3), k, k)
    twin = cache.clone()
    twin.update(0, torch.tensor([3]), torch.ones(1, 1, 4), torch.ones(1, 1, 4))
    assert torch.equal(twin.get(0)[0][:3], k) and twin.lengths == [4]
    assert cache.lengths == [3] and torch.equal(cache.get(0)[0], k)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(num_blocks=4.0), "num_blocks must be an integer"),
    (dict(block_size=True), "block_size must be an integer"),
    (dict(num_kv_heads=-2), "num_kv_heads must be an integer >= 1"),
    (dict(dtype=torch.int32), "floating-point"),
    (dict(device="no-such-device"), "device"),
    # K and V x num_layers x num_blocks x block_size x num_kv_heads x head_dim x 4 bytes
    (dict(num_blocks=10**9, head_dim=4096), r"would need 524,288,000,000,000 bytes .*max_bytes"),
    (dict(max_bytes=1000), r"would need 2,048 bytes .*limit of 1,000 bytes"),
])
def test_pool_refuses_bad_types_and_absurd_sizes(kwargs, msg):
    """Non-integer sizes, a non-float dtype, an unknown device and a pool bigger than the limit are refused before
    anything is allocated, the last naming the bytes it would need."""
    args = dict(num_layers=2, num_blocks=4, block_size=4, num_kv_heads=2, head_dim=4, device="cpu") | kwargs
    with pytest.raises(ValueError, match=msg):
        KVCachePool(**args)


def test_pool_within_a_raised_limit_is_built():
    """max_bytes is a limit, not a size: a pool under it is built as usual."""
    assert KVCachePool(1, 4, 4, 1, 4, device="cpu", max_bytes=512).nbytes == 512


def test_write_kv_refuses_a_slot_given_twice():
    """Two tokens for one slot in one call would leave which write wins undefined: ValueError, nothing written.
    Repeated -1 (skip) entries are fine."""
    pool = KVCachePool(1, 4, 2, 1, 4, device="cpu")
    kc, vc = pool.layer(0)
    key = torch.randn(3, 1, 4)
    with pytest.raises(ValueError, match="slot 5 appears more than once"):
        write_kv(kc, vc, key, key, torch.tensor([5, 1, 5]))
    assert kc.eq(0).all()
    write_kv(kc, vc, key, key, torch.tensor([-1, 1, -1]))
    assert torch.equal(kc.reshape(-1, 1, 4)[1], key[1])


def test_write_kv_into_a_strided_cache_lands_where_locate_reads():
    """A non-contiguous cache (kv-head-major storage seen as [num_blocks, block_size, num_kv_heads, head_dim]) is
    written in place, each token where locate() reads it."""
    storage = torch.zeros(6, 2, 4, 8)  # [num_blocks, num_kv_heads, block_size, head_dim]
    kc, vc = storage.transpose(1, 2), storage.clone().transpose(1, 2)
    table, key = [4, 1], torch.randn(7, 2, 8)
    write_kv(kc, vc, key, -key, slot_mapping(table, 0, 7, 4))
    for i in range(7):
        a = locate(i, table, 4)
        assert torch.equal(kc[a.physical_block_id, a.block_offset], key[i])
        assert torch.equal(storage[a.physical_block_id, :, a.block_offset], key[i])
        assert torch.equal(vc[a.physical_block_id, a.block_offset], -key[i])


@pytest.mark.parametrize("args, msg", [
    ((None, [0, 1], "k"), "must be a torch.Tensor"),
    ((0, torch.tensor([0.0, 1.0]), "k"), "integer tensor"),
    ((0, torch.tensor([2, 2]), "k"), "repeats a position"),
    ((0, torch.tensor([0, 1]), "short"), r"\[n, num_kv_heads, head_dim\]"),
    ((3, torch.tensor([0, 1]), "k"), "layer 3 is outside"),
    ((0.0, torch.tensor([0, 1]), "k"), "layer must be an integer"),
    ((0, torch.tensor([0, 10**6]), "k"), "would need .* bytes"),
])
def test_contiguous_cache_update_refuses_bad_input(args, msg):
    """Bad positions, shapes, layers or growth past max_bytes raise ValueError, and nothing is written."""
    cache = ContiguousKVCache(2, 1, 4, device="cpu", max_bytes=1 << 20)
    layer, pos, which = args
    key = torch.randn(2, 1, 4) if which == "k" else torch.randn(2, 1, 3)
    if layer is None:
        layer, pos = 0, [0, 1]
    with pytest.raises(ValueError, match=msg):
        cache.update(layer, pos, key, key)
    assert cache.lengths == [0, 0] and cache.keys.eq(0).all()


@pytest.mark.parametrize("kwargs, msg", [
    (dict(num_kv_heads=0), "num_kv_heads must be an integer >= 1"), (dict(capacity=0), "capacity must be an integer >= 1"),
    (dict(head_dim=2.0), "head_dim must be an integer"), (dict(capacity=10**12), "would need"),
])
def test_contiguous_cache_refuses_bad_sizes(kwargs, msg):
    """Sizes and capacity are integers >= 1, and the cache must fit in max_bytes."""
    args = dict(num_layers=1, num_kv_heads=1, head_dim=4, device="cpu") | kwargs
    with pytest.raises(ValueError, match=msg):
        ContiguousKVCache(**args)
