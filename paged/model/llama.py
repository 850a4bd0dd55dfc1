"""A Llama decoder in plain torch, mathematically identical to transformers' `LlamaForCausalLM`.

Parameter names match transformers exactly, so a checkpoint moves between the two without
renaming. Three config switches cover `Qwen2ForCausalLM` (bias on q/k/v) and `Qwen3ForCausalLM`
(RMSNorm on each query/key head, an explicit head_dim); `rope_type="llama3"` gives Llama 3.1's
frequency scaling. Everything else is the same model.

The KV cache is not the model's business. In inference each attention layer hands its post-RoPE
q/k/v to a pluggable `backend(layer_idx, q, k, v)`, which writes k/v into whatever cache it owns
(a paged pool, a contiguous buffer) and returns the attention output. The same weights and math
run behind any cache layout, so any difference in the logits is the cache's fault.

For inference the weights are laid out differently in memory, with the same names, shapes and
values (TinyLlama.arrange_weights): column-major projections, q/k/v as views of one fused weight
(one matmul for all three), and gate/up likewise.

The module base Direct (fast calls and attribute lookups) is in direct.py, RoPE in rope.py, the
leaf layers (Linear, Embedding, the fused linears, RMSNorm) in layers.py. In CPU float32
inference, RMSNorm (with the residual add before it), RoPE and SwiGLU's silu(gate) * up run as C
loops (paged/kernels/native_ops.py): the same math without torch's per-op cost, which at decode
outweighs the arithmetic. torch's ops stay the reference path.

Shape legend: B batch rows, T tokens per row, N flattened tokens of one engine step, H num_heads,
K num_kv_heads, D head_dim, C hidden_size, I intermediate_size, V vocab_size.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from paged.config import ModelConfig
from paged.kernels import native_ops
from paged.model.direct import Direct
from paged.model.layers import Embedding, Fused, Linear, RMSNorm, fuse_linears, fused_linear
from paged.model.layers import linear_ptrs
from paged.model.rope import (RotaryEmbedding, apply_rope,  # noqa: F401 (re-exported)
                              llama3_inv_freq, rotate_half)
from paged.chapters.window import windowed_rows

# backend(layer_idx, q [N, H, D], k [N, K, D], v [N, K, D]) -> out [N, H, D]
AttentionBackend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class Attention(Direct):
    """Grouped-query attention: query head h reads kv head h // (num_heads // num_kv_heads)."""

    def __init__(self, config: ModelConfig, layer_idx: int,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        c, d, bias = config.hidden_size, config.head_dim, config.qkv_bias
        self.q_proj = Linear(c, self.num_heads * d, bias=bias, device=device)  # weight [H*D, C]
        self.k_proj = Linear(c, self.num_kv_heads * d, bias=bias, device=device)  # weight [K*D, C]
        self.v_proj = Linear(c, self.num_kv_heads * d, bias=bias, device=device)  # weight [K*D, C]
        self.o_proj = Linear(self.num_heads * d, c, bias=config.o_proj_bias,
                             device=device)  # weight [C, H*D]
        if config.qk_norm:  # Qwen3: one RMSNorm weight [D] shared by every head
            self.q_norm = RMSNorm(d, config.rms_norm_eps, device)
            self.k_norm = RMSNorm(d, config.rms_norm_eps, device)
        self.qk_norm = config.qk_norm
        self.fused_qkv: Fused | None = None  # fuse_qkv_ sets it
        self.fused_ptrs: tuple[int, ...] = ()

    def fuse_qkv_(self) -> None:
        """q_proj, k_proj and v_proj as views of one fused weight (fuse_linears): one matmul."""
        self.fused_qkv, self.fused_ptrs = fuse_linears((self.q_proj, self.k_proj, self.v_proj))

    def _qkv_ptrs(self) -> tuple[int, ...]:
        """The q/k/v parameters' data pointers (see linear_ptrs)."""
        return linear_ptrs((self.q_proj, self.k_proj, self.v_proj))

    def _qkv(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., C] -> q, k and v side by side [..., (H+2K)*D] (fused_linear)."""
        return fused_linear(x, (self.q_proj, self.k_proj, self.v_proj), self.fused_qkv,
                            self.fused_ptrs)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                backend: AttentionBackend | None) -> torch.Tensor:
        """x [B, T, C] (backend None) or [N, C] (backend given) -> same shape.

        Raises: ValueError if the backend returns another shape than [N, num_heads, head_dim].
        """
        lead = x.shape[:-1]
        h, kv = self.num_heads, self.num_kv_heads
        # [..., H + 2K, D]: q heads, k heads, v heads
        qkv = self._qkv(x).view(*lead, h + 2 * kv, self.head_dim)
        # Views by narrow(dim, start, length): the same as qkv[..., :h + kv, :], at half the cost.
        qk, v = qkv.narrow(-2, 0, h + kv), qkv.narrow(-2, h + kv, kv)
        if self.qk_norm:
            qk = torch.cat((self.q_norm(qk.narrow(-2, 0, h)), self.k_norm(qk.narrow(-2, h, kv))),
                           dim=-2)
        # q and k heads rotated together: one set of RoPE ops, not two; in place in qkv on CPU in
        # fp32 inference
        rotated = native_ops.rope_(qk, cos, sin)
        qk = apply_rope(qk, cos, sin) if rotated is None else rotated
        q, k = qk.narrow(-2, 0, h), qk.narrow(-2, h, kv)  # [..., H, D], [..., K, D]
        if backend is None:
            # Causal attention within each row; SDPA wants [B, heads, T, D]. enable_gqa maps query
            # head h to kv head h // (H // K), the same grouping as transformers' repeat_kv.
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                 v.transpose(1, 2), is_causal=True,
                                                 enable_gqa=True)  # [B, H, T, D]
            out = out.transpose(1, 2)  # [B, T, H, D]
        else:
            out = backend(self.layer_idx, q, k, v)  # [N, H, D]
            expected = (*lead, self.num_heads, self.head_dim)
            if tuple(out.shape) != expected:
                raise ValueError(f"attention backend returned shape {tuple(out.shape)} for layer "
                                 f"{self.layer_idx}, expected {expected} "
                                 "([N, num_heads, head_dim])")
        return self.o_proj(out.reshape(*lead, self.num_heads * self.head_dim))


class MLP(Direct):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        c, i = config.hidden_size, config.intermediate_size
        self.intermediate_size = i
        self.gate_proj = Linear(c, i, bias=False, device=device)  # weight [I, C]
        self.up_proj = Linear(c, i, bias=False, device=device)  # weight [I, C]
        self.down_proj = Linear(i, c, bias=False, device=device)  # weight [C, I]
        self.fused_gate_up: Fused | None = None  # fuse_gate_up_ sets it
        self.fused_ptrs: tuple[int, ...] = ()

    def fuse_gate_up_(self) -> None:
        """gate_proj and up_proj as views of one fused weight (fuse_linears): one matmul."""
        self.fused_gate_up, self.fused_ptrs = fuse_linears((self.gate_proj, self.up_proj))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., C] -> [..., C]."""
        # training: autograd needs silu's input kept, so nothing in place
        if torch.is_grad_enabled():
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        # Inference: gate and up from one matmul [..., 2I], then silu(gate) * up in place (one C
        # loop on CPU in fp32, else torch's two ops), no [..., I] tensor to allocate.
        i = self.intermediate_size
        gate_up = fused_linear(x, (self.gate_proj, self.up_proj), self.fused_gate_up,
                               self.fused_ptrs)
        gate, up = gate_up.narrow(-1, 0, i), gate_up.narrow(-1, i, i)
        act = native_ops.silu_mul_(gate, up)
        return self.down_proj(F.silu(gate, inplace=True).mul_(up) if act is None else act)


class DecoderLayer(Direct):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: ModelConfig, layer_idx: int,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, device)
        self.self_attn = Attention(config, layer_idx, device)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, device)
        self.mlp = MLP(config, device)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                backend: AttentionBackend | None) -> torch.Tensor:
        """x [B, T, C] or [N, C] -> same shape."""
        attn = self.self_attn(self.input_layernorm(x), cos, sin, backend)
        # x + attn, and the norm of that sum
        x, h = self.post_attention_layernorm.add_forward(attn, x)
        return x + self.mlp(h)


class Decoder(Direct):
    """Embeddings, the layer stack and the final norm: the `model.` prefix in the checkpoint."""

    def __init__(self, config: ModelConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        # On meta, hand Embedding its (empty) weight: its own random init of a meta tensor costs
        # seconds (it imports torch._dynamo). Elsewhere it initialises as always, so seeded models
        # keep their exact weights.
        meta_weight = (torch.empty(config.vocab_size, config.hidden_size, device="meta")
                       if torch.device(device or "cpu").type == "meta" else None)
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size, device=device,
                                         _weight=meta_weight)  # weight [V, C]
        self.layers = nn.ModuleList(DecoderLayer(config, i, device)
                                    for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, device)
        self.rotary_emb = RotaryEmbedding(config)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                backend: AttentionBackend | None) -> torch.Tensor:
        """input_ids [B, T] or [N] -> the final norm's hidden states [..., C]."""
        x = self.embed_tokens(input_ids)  # [..., C]
        cos, sin = self.rotary_emb(positions, x.dtype)  # [..., 1, D] each, shared by every layer
        for layer in self.layers:
            x = layer(x, cos, sin, backend)
        return self.norm(x)


class TinyLlama(nn.Module):
    """Llama causal LM. `model(input_ids, positions, backend=None)` -> logits.

    backend None (training / no cache): input_ids [B, T] int64, positions [B, T] or [T] or None
        (= arange(T)); causal attention within each row. Returns logits [B, T, V].
    backend given (inference): input_ids [N] (a step's scheduled tokens, sequences back to back),
        positions [N]; every layer calls backend(layer_idx, q [N, H, D], k [N, K, D],
        v [N, K, D]) with post-RoPE tensors and expects [N, H, D] back. Returns logits [N, V].

    device="meta" builds the structure without memory or random init: load_model does that, then
    swaps the checkpoint's tensors in.
    """

    def __init__(self, config: ModelConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.config = config
        self.model = Decoder(config, device)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False,
                              device=device)  # weight [V, C]
        if torch.device(device or "cpu").type != "meta":
            self.apply(self._init_weights)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.arrange_weights()

    def arrange_weights(self) -> None:
        """Lay the weights out for fast inference, same values and names.

        Every projection's weight column-major (Linear.column_major_), q/k/v side by side
        (Attention.fuse_qkv_), gate/up too (MLP.fuse_gate_up_). load_model calls it again after
        swapping a checkpoint's tensors in. A tied lm_head is left alone: its weight is the
        embedding table, read by rows.
        """
        for module in self.modules():
            if isinstance(module, Linear) and not (module is self.lm_head
                                                   and self.config.tie_word_embeddings):
                module.column_major_()
        # after the loop above, which would copy the views apart
        for layer in self.model.layers:
            layer.self_attn.fuse_qkv_()
            layer.mlp.fuse_gate_up_()

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """transformers' default for Llama: N(0, 0.02) for every matrix, zero biases.

        RMSNorm weights stay at 1.
        """
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor | None = None,
                backend: AttentionBackend | None = None,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, V] (no backend) or [N, V]; with `rows` (int64 [R]) only those, [R, V].

        An engine step needs each sequence's last token only: the vocabulary projection of every
        prompt token would be wasted.
        Raises: ValueError if the inputs' shapes do not fit the call (or rows without a backend).
        """
        # no cache: [B, T] rows, causal inside each (and the window, if the model has one)
        plain = backend is None
        if plain:
            if input_ids.dim() != 2:
                raise ValueError(f"without a backend input_ids must be [B, T], got shape "
                                 f"{tuple(input_ids.shape)}")
            if positions is None:
                positions = torch.arange(input_ids.shape[1], device=input_ids.device)
            positions = positions.expand_as(input_ids)
            backend = windowed_rows(self.config.sliding_window)  # None: SDPA's own causal mask
        else:
            if (input_ids.dim() != 1 or positions is None
                    or tuple(positions.shape) != tuple(input_ids.shape)):
                raise ValueError("with a backend input_ids and positions must both be [N], got "
                                 f"{tuple(input_ids.shape)} and "
                                 f"{None if positions is None else tuple(positions.shape)}")
        hidden = self.model(input_ids, positions, backend)
        if rows is not None:
            if plain:
                raise ValueError("rows selects tokens of a backend call ([N] inputs); "
                                 "without a backend pass none")
            hidden = hidden.index_select(0, rows)
        return self.lm_head(hidden)

    def num_parameters(self) -> int:
        """Distinct parameters (a tied lm_head is counted once)."""
        return sum(p.numel() for p in self.parameters())
