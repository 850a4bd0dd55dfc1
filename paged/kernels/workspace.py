"""Per-thread reusable buffers for the kernels (gather's K/V, fused's tiles): a large fresh buffer
each call spends most of its time in page faults. The one workspace cache of the library;
paged/attention.py needs none.
"""

from __future__ import annotations

import math
import threading

import torch


class Workspace(threading.local):
    """Reusable buffers by name, one set per thread."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, shape: int | tuple[int, ...], dtype: torch.dtype,
            device: torch.device) -> torch.Tensor:
        """A buffer of `shape` (contents undefined), grown when a call needs more than the last one.
        """
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        numel = math.prod(shape)
        # Tensors made under inference_mode cannot be written outside it (and vice versa): keep them
        # apart.
        key = (name, dtype, device, torch.is_inference_mode_enabled())
        buf = self.buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=device)
            self.buffers[key] = buf
        return buf[:numel].view(shape)


workspace = Workspace()
