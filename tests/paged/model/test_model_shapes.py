"""paged.model.shapes lists, by arithmetic, exactly the names and shapes of the model TinyLlama builds (read from
its state_dict on "meta"), in the same order, for every architecture switch the loader accepts."""

from __future__ import annotations

import pytest

from paged.config import ModelConfig
from paged.model import TinyLlama
from paged.model.shapes import tensor_shapes, tensors_per_layer

pytestmark = pytest.mark.model

VARIANTS = {
    "llama": {},
    "llama_bias_tied": {"attention_bias": True, "tie_word_embeddings": True},
    "qwen2": {"model_type": "qwen2"},
    "qwen3_own_head_dim": {"model_type": "qwen3", "head_dim": 48},
    "qwen3_bias": {"model_type": "qwen3", "attention_bias": True},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_tensor_shapes_are_the_models_own(variant):
    """Every name and shape of the built model's state_dict, nothing more, in order; the per-layer count agrees."""
    config = ModelConfig(num_hidden_layers=3, vocab_size=50, hidden_size=64, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=96, **VARIANTS[variant])
    built = {name: tuple(t.shape) for name, t in TinyLlama(config, device="meta").state_dict().items()}
    assert list(tensor_shapes(config).items()) == list(built.items())
    assert tensors_per_layer(config) * 3 + 3 == len(built)
