"""The engine's per-step native call: native_decode for every layer of one decode step, its Python checks and
plans made once per step (native.py holds the kernel's loading, its rules and the one-call wrapper)."""

from __future__ import annotations

import torch

from .native import _POINTERS, _check_cpu, _last_kv, _load, _plan, _raise_status, _state


class DecodeStep:
    """native_decode for every layer of one engine decode step, its Python cut to what changes per layer.

    An engine step calls the kernel once per layer with the same block tables, context lens and shapes; only the
    layer's pool and the queries change. So the pool (key_cache / value_cache of every layer, [num_layers,
    num_blocks, block_size, num_kv_heads, head_dim], contiguous, CPU), the tables [B, max_blocks] and lens [B] are
    checked, converted and planned once here, and each `step(layer, query)` checks the query [B, num_heads,
    head_dim] and hands the kernel that layer's pointers. Raises ValueError as native_decode (and for a pool that
    is not one contiguous CPU tensor each, a layer outside it, a query unlike the first); RuntimeError when the kernel
    cannot be built. Returns [B, num_heads, head_dim] in the query's dtype, as paged_attention_decode.
    """

    def __init__(self, query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                 block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> None:
        if (key_cache.dim() != 5 or value_cache.shape != key_cache.shape
                or not (key_cache.is_contiguous() and value_cache.is_contiguous())):
            raise ValueError(f"DecodeStep needs the whole pool, one contiguous [num_layers, num_blocks, block_size, "
                             f"num_kv_heads, head_dim] tensor each; got key_cache {tuple(key_cache.shape)}")
        _check_cpu(query, key_cache, value_cache)
        # (the layer's shape, and the tables and lens as the kernel will read them: tables on the pool's device)
        tables = block_tables if block_tables.is_cpu else block_tables.cpu()
        lens = context_lens if context_lens.is_cpu else context_lens.cpu()
        self.plan = plan = _plan(query.shape, query.dtype, key_cache.shape[1:], key_cache.dtype,
                                 value_cache.shape[1:], value_cache.dtype, tables.shape, tables.dtype, lens.shape,
                                 lens.dtype, torch.get_num_threads())
        self.tables = (tables.long() if plan.long_tables else tables).contiguous()
        self.lens = (lens.to(torch.int64) if plan.long_lens else lens).contiguous()
        self.key_cache, self.value_cache, self.scale = key_cache, value_cache, scale  # (kept alive: we hold pointers)
        self.query_shape, self.query_dtype, self.num_layers = query.shape, query.dtype, key_cache.shape[0]
        self.layer_bytes = key_cache.stride(0) * key_cache.element_size()  # from one layer's K (or V) to the next
        self.pointers = (key_cache.data_ptr(), value_cache.data_ptr(), self.tables.data_ptr(), self.lens.data_ptr())
        self.fn = _state.get("fn") or _load()

    def __call__(self, layer: int, query: torch.Tensor) -> torch.Tensor:
        """Decode attention of `layer` for query [B, num_heads, head_dim] (this step's tables and lens)."""
        if type(layer) is not int or not 0 <= layer < self.num_layers:  # a pointer is computed from it: check
            raise ValueError(f"layer {layer!r} is outside [0, {self.num_layers})")
        if query.shape != self.query_shape or query.dtype != self.query_dtype or not query.is_cpu:
            raise ValueError(f"DecodeStep was prepared for queries {tuple(self.query_shape)} {self.query_dtype} on "
                             f"CPU; got {tuple(query.shape)} {query.dtype} on {query.device}")
        plan = self.plan
        if plan.empty:
            return query.new_empty(query.shape)
        q = query.to(plan.compute) if plan.convert_query else query
        q = q if q.is_contiguous() else q.contiguous()
        out = torch.empty_like(q)
        key_base, value_base, tables_ptr, lens_ptr = self.pointers
        key_ptr = key_base + layer * self.layer_bytes
        warm = key_ptr == _last_kv[0]  # (an engine's layers take turns: cold, but for a one-layer model)
        _last_kv[0] = key_ptr
        status = self.fn(plan.head + _POINTERS.pack(q.data_ptr(), key_ptr, value_base + layer * self.layer_bytes,
                                                    tables_ptr, lens_ptr, out.data_ptr()) + plan.tails[warm],
                         self.scale)
        if status:
            _raise_status(status, self.tables, self.lens, self.key_cache.shape[1], self.key_cache.shape[2])
        return out if plan.compute == self.query_dtype else out.to(self.query_dtype)
