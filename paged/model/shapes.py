"""The tensors a ModelConfig implies: every name and shape of TinyLlama's state_dict, by arithmetic.

Computed from the config's numbers alone, so a checkpoint is checked without building a model
(even an empty "meta" one costs Python objects per layer and head_dim floats of RoPE table).

    model.embed_tokens.weight                  [vocab_size, C]
    model.layers.{i}.input_layernorm.weight    [C]
    model.layers.{i}.self_attn.q_proj.weight   [H*D, C]   (+ .bias [H*D] with qkv_bias)
    model.layers.{i}.self_attn.k_proj.weight   [K*D, C]   (+ .bias [K*D]); v_proj the same
    model.layers.{i}.self_attn.o_proj.weight   [C, H*D]   (+ .bias [C] with o_proj_bias)
    model.layers.{i}.self_attn.q_norm.weight   [D]        (Qwen3; k_norm the same)
    model.layers.{i}.post_attention_layernorm.weight [C]
    model.layers.{i}.mlp.gate_proj.weight      [I, C]; up_proj the same; down_proj [C, I]
    model.norm.weight                          [C]
    lm_head.weight                             [vocab_size, C]  (optional when tie_word_embeddings)

C hidden_size, H num_attention_heads, K num_key_value_heads, D head_dim, I intermediate_size.
"""

from __future__ import annotations

from paged.config import ModelConfig


def layer_shapes(config: ModelConfig, i: int) -> dict[str, tuple[int, ...]]:
    """name -> shape of layer i's tensors."""
    c, d, inter = config.hidden_size, config.head_dim, config.intermediate_size
    q, kv = config.num_attention_heads * d, config.num_key_value_heads * d
    p = f"model.layers.{i}."
    out = {p + "input_layernorm.weight": (c,)}
    for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
        out[f"{p}self_attn.{name}.weight"] = (rows, c)
        if config.qkv_bias:
            out[f"{p}self_attn.{name}.bias"] = (rows,)
    out[p + "self_attn.o_proj.weight"] = (c, q)
    if config.o_proj_bias:
        out[p + "self_attn.o_proj.bias"] = (c,)
    if config.qk_norm:
        out[p + "self_attn.q_norm.weight"] = (d,)
        out[p + "self_attn.k_norm.weight"] = (d,)
    out[p + "post_attention_layernorm.weight"] = (c,)
    out[p + "mlp.gate_proj.weight"] = (inter, c)
    out[p + "mlp.up_proj.weight"] = (inter, c)
    out[p + "mlp.down_proj.weight"] = (c, inter)
    return out


def tensors_per_layer(config: ModelConfig) -> int:
    """How many tensors one layer holds (the same for every layer)."""
    return len(layer_shapes(config, 0))


def tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """name -> shape of every tensor of the model `config` describes, lm_head.weight included.

    A tied checkpoint may leave lm_head out. One dict entry per tensor: check the layer count
    against the checkpoint first.
    """
    c = config.hidden_size
    out = {"model.embed_tokens.weight": (config.vocab_size, c)}
    for i in range(config.num_hidden_layers):
        out.update(layer_shapes(config, i))
    out["model.norm.weight"] = (c,)
    out["lm_head.weight"] = (config.vocab_size, c)
    return out
