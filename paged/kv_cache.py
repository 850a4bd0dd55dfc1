"""Where K/V live: the paged pool (physical blocks), write_kv, and the contiguous reference every
paged result is checked against (one sequence's K/V in token order, like gpt-fast's KVCache)."""

from __future__ import annotations

from typing import Callable

import torch

from .attention_checks import (MAX_CACHE_BYTES, check_layer, check_pool_alloc, check_positions,
                               check_reference_alloc, check_write)
from .checks import as_int, default_device  # noqa: F401 (default_device: re-exported)
from .kernels import native_ops


class KVCachePool:
    """key_cache, value_cache [num_layers, num_blocks, block_size, num_kv_heads, head_dim].
    Raises: ValueError (nothing allocated) for a size < 1, a non-float dtype, K + V > max_bytes."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None, max_bytes: int = MAX_CACHE_BYTES,
                 zeros: Callable[..., torch.Tensor] = torch.zeros) -> None:
        shape, self.dtype, self.device = check_pool_alloc(
            num_layers, num_blocks, block_size, num_kv_heads, head_dim, dtype, device, max_bytes)
        self.num_layers, self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim = shape
        self.key_cache = zeros(shape, dtype=self.dtype, device=self.device)
        self.value_cache = zeros(shape, dtype=self.dtype, device=self.device)
        self._layers = list(zip(self.key_cache, self.value_cache))  # the per-layer views, made once

    def layer(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(key_cache, value_cache) of layer i: [num_blocks, block_size, num_kv_heads, head_dim]."""
        return self._layers[as_int(i, "layer", 0, self.num_layers - 1)]

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
        itemsize = torch.empty((), dtype=dtype).element_size()
        return 2 * num_layers * block_size * num_kv_heads * head_dim * itemsize


def write_kv(key_cache: torch.Tensor, value_cache: torch.Tensor, key: torch.Tensor,
             value: torch.Tensor, slot_mapping: torch.Tensor, validate: bool = True,
             pads: bool = True, fast: bool = False) -> None:
    """Write key, value [N, num_kv_heads, head_dim] into one layer's caches at slot_mapping [N]
    (-1: skipped). validate=False: unchecked; pads=False: no -1 looked for; fast: one C call.
    Raises: ValueError (nothing written) for a rule of attention_checks.check_write."""
    if validate:
        check_write(key_cache, value_cache, key, value, slot_mapping, pads)
    slots = slot_mapping if slot_mapping.dtype == torch.long else slot_mapping.long()
    if pads:
        keep = slots >= 0
        slots, key, value = slots[keep], key[keep], value[keep]
    if fast and native_ops.write_rows(key_cache, value_cache, key, value, slots):
        return  # CPU, contiguous caches and rows: written in C
    for cache, rows in ((key_cache, key), (value_cache, value)):
        if cache.is_contiguous():  # the pool as [num_slots, num_kv_heads, head_dim]: slot s, row s
            cache.flatten(0, 1).index_copy_(0, slots, rows)
        else:  # a strided cache cannot be viewed flat: address (block, offset) pairs instead
            cache.index_put_((slots // cache.shape[1], slots % cache.shape[1]), rows)


class ContiguousKVCache:
    """The reference: keys, values [num_layers, capacity, num_kv_heads, head_dim] in token order.
    Raises: ValueError for a size < 1, a non-float dtype, more than max_bytes (at any growth)."""

    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
                 capacity: int = 16, max_bytes: int = MAX_CACHE_BYTES) -> None:
        shape, dtype, device = check_reference_alloc(
            num_layers, capacity, num_kv_heads, head_dim, dtype, device, max_bytes)
        self.max_bytes = max_bytes
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * shape[0]  # tokens written so far, per layer

    def _grow(self, needed: int) -> None:
        num_layers, capacity, num_kv_heads, head_dim = self.keys.shape
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        check_reference_alloc(num_layers, capacity, num_kv_heads, head_dim, self.keys.dtype,
                              self.keys.device, self.max_bytes)
        new_rows = (num_layers, capacity - self.keys.shape[1], num_kv_heads, head_dim)  # zeros
        self.keys = torch.cat([self.keys, self.keys.new_zeros(new_rows)], dim=1)
        self.values = torch.cat([self.values, self.values.new_zeros(new_rows)], dim=1)

    def update(self, layer: int, input_pos: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write key, value [n, num_kv_heads, head_dim] at input_pos [n] of `layer`; get(layer).
        Raises: ValueError (nothing written) for a bad layer or position, growth past max_bytes."""
        layer = check_layer(layer, len(self.lengths))
        pos = check_positions(input_pos, key, value, self.keys.shape[2:], self.keys.device)  # [n]
        end = int(pos.max()) + 1 if pos.numel() else self.lengths[layer]
        self._grow(end)
        self.keys[layer].index_copy_(0, pos, key.to(self.keys.device, self.keys.dtype))
        self.values[layer].index_copy_(0, pos, value.to(self.keys.device, self.values.dtype))
        self.lengths[layer] = max(self.lengths[layer], end)
        return self.get(layer)

    def get(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """keys, values of `layer` in token order: [length, num_kv_heads, head_dim] views."""
        layer = check_layer(layer, len(self.lengths))
        n = self.lengths[layer]
        return self.keys[layer, :n], self.values[layer, :n]

    @property
    def length(self) -> int:
        return min(self.lengths)

    def clone(self) -> "ContiguousKVCache":
        """An independent copy (a forked sequence's twin starts from its parent's)."""
        twin = object.__new__(ContiguousKVCache)
        twin.keys, twin.values = self.keys.clone(), self.values.clone()
        twin.lengths, twin.max_bytes = list(self.lengths), self.max_bytes
        return twin

    def truncate(self, length: int) -> None:
        """Forget every token at position >= length (a preempted sequence is recomputed)."""
        length = as_int(length, "length", 0)
        self.lengths = [min(n, length) for n in self.lengths]
