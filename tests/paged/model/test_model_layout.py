"""TinyLlama.arrange_weights: column-major projections and q/k/v as views of one fused weight change no value, no
name and no shape, and the fused weight is never read stale (in-place updates write through it; a replaced
parameter makes the model concatenate the current ones instead); the RoPE table gives the computed angles."""

import pytest
import torch
from torch import nn

from paged.config import ModelConfig
from paged.model import TinyLlama, load_model
from paged.model.layers import linear_ptrs

from helpers import assert_close_scaled, assert_far_scaled

pytestmark = pytest.mark.model

CONFIGS = {
    "llama": ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
    "qwen2-bias": ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                              model_type="qwen2"),
    "qwen3-qk-norm": ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                 model_type="qwen3", head_dim=16),
}


def _random(config: ModelConfig) -> TinyLlama:
    torch.manual_seed(0)
    model = TinyLlama(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)  # in place: through the fused views
    return model


def _reference_logits(model: TinyLlama, ids: torch.Tensor) -> torch.Tensor:
    """The same model's logits with every parameter copied out into a plain contiguous tensor (rebuilt from its
    state_dict by load_state_dict(assign=True), so no view of a fused weight survives): the unfused math."""
    twin = TinyLlama(model.config, device="meta")
    twin.load_state_dict({k: v.clone().contiguous() for k, v in model.state_dict().items()}, assign=True)
    attn = twin.model.layers[0].self_attn
    assert attn._qkv_ptrs() != attn.fused_ptrs  # the twin concatenates its projections
    with torch.no_grad():
        return twin.eval()(ids)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_layout_keeps_names_shapes_and_values(name):
    """Weights are column-major and q/k/v (and gate/up) are views of a fused weight, yet state_dict has
    transformers' names and shapes, and the logits equal those of an unfused copy."""
    model = _random(CONFIGS[name])
    attn = model.model.layers[0].self_attn
    assert attn.fused_qkv is not None and attn._qkv_ptrs() == attn.fused_ptrs
    mlp = model.model.layers[1].mlp
    assert mlp.fused_gate_up is not None and linear_ptrs((mlp.gate_proj, mlp.up_proj)) == mlp.fused_ptrs
    assert attn.q_proj.weight.stride()[0] == 1 and model.model.layers[0].mlp.down_proj.weight.t().is_contiguous()
    state = model.state_dict()
    cfg = model.config
    assert tuple(state["model.layers.0.self_attn.k_proj.weight"].shape) == (cfg.num_key_value_heads * cfg.head_dim,
                                                                            cfg.hidden_size)
    ids = torch.randint(0, cfg.vocab_size, (2, 9))
    with torch.no_grad():
        got = model(ids)
    want = _reference_logits(model, ids)
    assert want.std() > 0.3
    assert_close_scaled(got, want, rel=1e-5)


def test_the_shipped_model_loads_fused():
    """load_model lays the checkpoint out: every layer's q/k/v are views of its fused weight."""
    model, _ = load_model()
    assert all(layer.self_attn._qkv_ptrs() == layer.self_attn.fused_ptrs for layer in model.model.layers)


def test_an_optimizer_step_reaches_the_fused_weight():
    """Training updates the parameters in place; inference afterwards (the fused path) sees the new values."""
    model = _random(CONFIGS["qwen2-bias"]).train()
    ids = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        before = model(ids)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    loss = nn.functional.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    opt.step()
    attn = model.model.layers[0].self_attn
    assert attn._qkv_ptrs() == attn.fused_ptrs  # still views: the fused path runs below
    with torch.no_grad():
        after = model.eval()(ids)
    assert_far_scaled(after, before, rel=1e-2)
    assert_close_scaled(after, _reference_logits(model, ids), rel=1e-5)


@pytest.mark.parametrize("part", ["self_attn.k_proj", "mlp.up_proj"])
def test_a_replaced_parameter_is_not_read_stale(part):
    """A parameter replaced by another tensor is no longer a view of the fused weight (q|k|v, gate|up): the model
    uses the new one."""
    model = _random(CONFIGS["llama"])
    ids = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        before = model(ids)
    proj = model.model.layers[1].get_submodule(part)
    proj.weight = nn.Parameter(torch.randn_like(proj.weight))
    with torch.no_grad():
        after = model(ids)
    assert_far_scaled(after, before, rel=1e-2)
    assert_close_scaled(after, _reference_logits(model, ids), rel=1e-5)


def test_rope_table_gives_the_textbook_angles_inside_and_past_it():
    """RotaryEmbedding looks positions up in its table and computes those past it: both equal cos/sin(p * theta **
    (-2i / D)) computed here in float64 (sin's first half negated), for any shape of positions."""
    from paged.model.rope import RotaryEmbedding

    config = CONFIGS["llama"]  # max_position_embeddings 64: the table holds positions 0..63
    rope = RotaryEmbedding(config)
    d = config.head_dim
    inv = 1.0 / config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    for positions in (torch.tensor([0, 5, 63]), torch.tensor([[3, 62], [7, 1]]), torch.tensor([2, 64, 900])):
        cos, sin = rope(positions, torch.float32)
        assert cos.shape == (*positions.shape, 1, d) and rope.table.shape == (64, 2, d)
        angles = positions.double()[..., None, None] * torch.cat((inv, inv))
        want_sin = angles.sin()
        want_sin[..., : d // 2] *= -1
        assert_close_scaled(cos.double(), angles.cos(), rel=1e-5)
        assert_close_scaled(sin.double(), want_sin, rel=1e-5)


def _stale_mirrors(model: TinyLlama) -> list[str]:
    """Direct modules' submodules and parameters whose plain attribute is not the registered object."""
    from paged.model.direct import Direct

    return [f"{name}.{key}" for name, module in model.named_modules() if isinstance(module, Direct)
            for registry in (module._parameters, module._modules) for key in registry
            if module.__dict__.get(key, "missing") is not registry[key]]


@pytest.mark.parametrize("overwrite", [False, True])
def test_attribute_mirrors_follow_every_registry_change(overwrite):
    """Submodules and parameters are plain attributes too (Direct), and each way of changing the registries keeps
    them the registered objects: building, load_state_dict(assign=True), model.to() (also when torch puts new
    Parameter objects in: overwrite_module_params_on_conversion), assignment, None, deletion, register_parameter.
    The converted model computes with its new parameters (compared with an unfused float64 copy)."""
    model = _random(CONFIGS["qwen2-bias"])
    assert not _stale_mirrors(model)
    model.load_state_dict({k: v.clone() for k, v in model.state_dict().items()}, assign=True)
    assert not _stale_mirrors(model)
    before = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(overwrite)
    try:
        model = model.to(torch.float64)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(before)
    assert not _stale_mirrors(model)
    ids = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        got = model(ids)
    assert got.dtype == torch.float64
    assert_close_scaled(got, _reference_logits(model, ids), rel=1e-9)
    mlp = model.model.layers[0].mlp
    mlp.up_proj.weight = nn.Parameter(torch.zeros_like(mlp.up_proj.weight))
    mlp.gate_proj.bias = None
    del mlp.down_proj.weight
    assert not hasattr(mlp.down_proj, "weight") and not _stale_mirrors(model)
    mlp.down_proj.register_parameter("weight", nn.Parameter(torch.ones(32, 48, dtype=torch.float64)))
    mlp.add_module("extra", nn.Identity())
    assert not _stale_mirrors(model) and mlp.up_proj.weight.abs().sum() == 0
