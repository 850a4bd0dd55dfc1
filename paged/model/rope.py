"""Rotary position embedding (RoPE) for paged.model's Llama.

Rotate-half RoPE, its cos/sin table, and Llama 3.1's frequency scaling. D is head_dim.
"""

from __future__ import annotations

import math

import torch

from paged.config import ModelConfig
from paged.model.direct import Direct


def llama3_inv_freq(inv_freq: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    """Llama 3.1's RoPE scaling of inv_freq [D/2] -> [D/2].

    A frequency turning fewer than rope_low_freq_factor times over the original training context
    (long wavelength) is divided by rope_factor, so positions beyond it look like ones it saw; one
    turning more than rope_high_freq_factor times (local detail) is kept; in between, a blend.
    """
    # turns over the old context
    turns = config.rope_original_max_position_embeddings / (2 * math.pi / inv_freq)
    low, high = config.rope_low_freq_factor, config.rope_high_freq_factor
    keep = ((turns - low) / (high - low)).clamp(0.0, 1.0)  # 0: fully scaled, 1: unchanged
    return (1 - keep) * inv_freq / config.rope_factor + keep * inv_freq


class RotaryEmbedding(Direct):
    """cos/sin tables for rotate-half RoPE from explicit positions (tokens need not be adjacent)."""

    # Positions whose cos/sin are computed once and then looked up (1 MiB per 32 of head_dim); a
    # position past them is computed on the spot. A decode step: two row lookups, not six ops.
    TABLE_POSITIONS = 4096

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        # A plain fp32 CPU tensor, not a buffer: derived from the config (so not in the checkpoint,
        # as in transformers), and it must stay fp32 when the model is cast to a low precision.
        d = config.head_dim
        exponents = torch.arange(0, d, 2, dtype=torch.int64, device="cpu").float() / d
        inv_freq = 1.0 / (config.rope_theta ** exponents)  # [D/2]
        self.inv_freq = (llama3_inv_freq(inv_freq, config) if config.rope_type == "llama3"
                         else inv_freq)
        self.table_len = min(config.max_position_embeddings, self.TABLE_POSITIONS)
        # [table_len, 2, D] fp32: each position's cos and signed sin
        self.table: torch.Tensor | None = None

    def angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [...] -> (cos, sin) [..., 1, D] in fp32, computed; sin's first half negated."""
        freqs = positions.float()[..., None, None] * self.inv_freq  # [..., 1, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [..., 1, D]: both halves share a frequency
        sin = emb.sin()
        sin[..., : freqs.shape[-1]].neg_()
        return emb.cos(), sin

    def forward(self, positions: torch.Tensor,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [...] -> (cos, sin), each [..., 1, D] (broadcast over heads), in `dtype`.

        Angles are fp32. Rows of the table when every position is in it (one lookup gives both:
        views of its [..., 2, D] rows), else computed.
        """
        # follow the inputs (model.to() does not move it)
        if self.inv_freq.device != positions.device:
            self.inv_freq, self.table = self.inv_freq.to(positions.device), None
        if self.table is None:
            cos, sin = self.angles(torch.arange(self.table_len, device=positions.device))
            self.table = torch.cat((cos, sin), dim=-2)  # [table_len, 2, D]
        n = positions.numel()
        # a decode step's few positions: bounds in Python, no tensor ops
        if n <= 256 and positions.is_cpu:
            flat = positions.reshape(-1).tolist()
            low, high = (min(flat), max(flat)) if n else (-1, -1)
        else:
            low, high = positions.aminmax() if n else (-1, -1)
        if not 0 <= int(low) <= int(high) < self.table_len:
            cos, sin = self.angles(positions)
        else:
            both = self.table.index_select(0, positions.reshape(-1)).view(
                *positions.shape, 2, -1)
            cos, sin = both.narrow(-2, 0, 1), both.narrow(-2, 1, 1)
        return (cos, sin) if dtype == torch.float32 else (cos.to(dtype), sin.to(dtype))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] on the last dimension (textbook form; apply_rope uses one roll)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x [..., heads, D] rotated: x * cos + rotate_half(x) * sin; cos/sin [..., 1, D].

    rotate_half(x) * sin == roll(x, D/2) * signed_sin, signed_sin = [-sin1, sin2]: the same
    products (a negation is exact) in two ops fewer, which counts at decode on a few numbers.
    """
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin
