"""Where K/V live: the paged pool (physical blocks) and the contiguous reference cache.

`KVCachePool` is the vLLM-style pool: one big tensor per layer, cut into `num_blocks` blocks of `block_size` token
slots. `ContiguousKVCache` is the reference every paged result is checked against: one sequence's K/V appended in
token order, like gpt-fast's KVCache.
"""

from __future__ import annotations

import torch

from .addressing import check_block_size


def default_device() -> torch.device:
    """cuda when available, else cpu."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


class KVCachePool:
    """The physical KV cache: `key_cache` / `value_cache` of shape
    [num_layers, num_blocks, block_size, num_kv_heads, head_dim], zero-initialised."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        _positive_int("num_layers", num_layers)
        _positive_int("num_blocks", num_blocks)
        check_block_size(block_size)
        _positive_int("num_kv_heads", num_kv_heads)
        _positive_int("head_dim", head_dim)
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.num_kv_heads, self.head_dim, self.dtype = num_kv_heads, head_dim, dtype
        self.device = torch.device(device) if device is not None else default_device()
        shape = (num_layers, num_blocks, block_size, num_kv_heads, head_dim)
        self.key_cache = torch.zeros(shape, dtype=dtype, device=self.device)
        self.value_cache = torch.zeros(shape, dtype=dtype, device=self.device)

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views (key_cache, value_cache) of layer i, each [num_blocks, block_size, num_kv_heads, head_dim]."""
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
    if key.device != key_cache.device or slot_mapping.device != key_cache.device:
        raise ValueError(f"device mismatch: key on {key.device}, slot_mapping on {slot_mapping.device}, "
                         f"cache on {key_cache.device}")
    if slot_mapping.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"slot_mapping must be an integer tensor, got {slot_mapping.dtype}")
    if slot_mapping.numel():
        num_slots = num_blocks * block_size
        bad = (slot_mapping < -1) | (slot_mapping >= num_slots)
        if bool(bad.any()):
            slot = int(slot_mapping[bad][0])
            raise ValueError(f"slot {slot} is outside the pool: slots are in [0, {num_slots}) "
                             f"(num_blocks {num_blocks} x block_size {block_size}), or -1 to skip")


def write_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             slot_mapping: torch.Tensor, validate: bool = True) -> None:
    """Write each token's K/V into one layer's cache at its slot.

    key_cache, value_cache: [num_blocks, block_size, num_kv_heads, head_dim] (modified in place)
    key, value:             [num_tokens, num_kv_heads, head_dim]
    slot_mapping:           [num_tokens] int; slot = physical_block_id * block_size + block_offset; -1 is skipped.
    Raises ValueError (nothing written) on mismatched shapes, dtypes, devices or slots outside the pool.
    """
    if validate:
        check_write(key_cache, value_cache, key, value, slot_mapping)
    slots = slot_mapping.long()
    keep = slots >= 0
    if not bool(keep.all()):
        slots, key, value = slots[keep], key[keep], value[keep]
    # A flat [num_slots, num_kv_heads, head_dim] view: slot s is exactly row s.
    key_cache.view(-1, *key_cache.shape[2:]).index_copy_(0, slots, key)
    value_cache.view(-1, *value_cache.shape[2:]).index_copy_(0, slots, value)


class ContiguousKVCache:
    """The reference: one sequence's K/V for every layer, stored in token order.

    keys / values: [num_layers, capacity, num_kv_heads, head_dim]; token i of layer l is simply keys[l, i].
    Grows by doubling, so no max length has to be guessed up front.
    """

    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None, capacity: int = 16) -> None:
        _positive_int("num_layers", num_layers)
        _positive_int("num_kv_heads", num_kv_heads)
        _positive_int("head_dim", head_dim)
        device = torch.device(device) if device is not None else default_device()
        shape = (num_layers, max(capacity, 1), num_kv_heads, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * num_layers  # tokens written so far, per layer

    def _grow(self, needed: int) -> None:
        capacity = self.keys.shape[1]
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_zeros((old.shape[0], capacity, *old.shape[2:]))
            new[:, : old.shape[1]] = old
            setattr(self, name, new)

    def update(self, layer: int, input_pos: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write key/value [n, num_kv_heads, head_dim] at token positions input_pos [n] of `layer`; return that
        layer's keys, values [length, num_kv_heads, head_dim] up to the furthest token written."""
        if input_pos.numel() != key.shape[0] or value.shape != key.shape:
            raise ValueError(f"input_pos has {input_pos.numel()} entries for key {tuple(key.shape)} / value "
                             f"{tuple(value.shape)}")
        if input_pos.numel() and int(input_pos.min()) < 0:
            raise ValueError("input_pos must be >= 0")
        end = int(input_pos.max()) + 1 if input_pos.numel() else self.lengths[layer]
        self._grow(end)
        pos = input_pos.to(self.keys.device).long()
        self.keys[layer].index_copy_(0, pos, key.to(self.keys.dtype))
        self.values[layer].index_copy_(0, pos, value.to(self.values.dtype))
        self.lengths[layer] = max(self.lengths[layer], end)
        return self.get(layer)

    def get(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """keys, values of `layer` in token order: [length, num_kv_heads, head_dim] views."""
        n = self.lengths[layer]
        return self.keys[layer, :n], self.values[layer, :n]

    @property
    def length(self) -> int:
        return min(self.lengths)

    def clone(self) -> "ContiguousKVCache":
        """An independent copy (a forked sequence's twin starts from its parent's history)."""
        twin = object.__new__(ContiguousKVCache)
        twin.keys, twin.values, twin.lengths = self.keys.clone(), self.values.clone(), list(self.lengths)
        return twin

    def truncate(self, length: int) -> None:
        """Forget every token at position >= length (used when a sequence is preempted and recomputed)."""
        self.lengths = [min(n, length) for n in self.lengths]
