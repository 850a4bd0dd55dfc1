"""A hostile checkpoint set, made in tmp dirs: each folder is refused with a ValueError before any model is built
(not even on "meta"), with little Python memory (tracemalloc) and a bounded amount of work (call_budget): headers
with 200,000 or 20,000 tensors, a Qwen3 head_dim of 2**27, 10**9 layers, a vocab of 10**12, and files whose sizes
alone (sparse files: no disk used) are past what a model directory may make us read."""

from __future__ import annotations

import json
import struct
import tracemalloc

import pytest
import torch

import paged.model.io as model_io
import paged.model.llama as llama
from call_budget import call_budget
from paged.config import ModelConfig
from paged.model import TinyLlama, load_model, save_model

pytestmark = pytest.mark.model

TINY = ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
QWEN3 = ModelConfig(**{**TINY.to_dict(), "model_type": "qwen3", "head_dim": 16})
PYTHON_PEAK = 32 * 2**20  # bytes of Python objects a refusal may allocate (a 200k-entry header parse is ~10x this)
WORK = 100_000  # Python calls + lines a refusal may take


@pytest.fixture
def model_dir(tmp_path):
    torch.manual_seed(0)
    return save_model(TinyLlama(TINY), tmp_path / "model")


def edit_config(directory, **changes):
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def write_header(path, entries: dict, key: str = "data_offsets"):
    """A safetensors file of zero-size F32 tensors only (no data bytes): 8-byte length, then the JSON header."""
    text = json.dumps({name: {"dtype": "F32", "shape": [0], key: [0, 0]} for name in entries})
    if key != "data_offsets":
        text = text.replace(f'"{key}"', '"data\\u005foffsets"')  # the same key, spelled with an escape
    raw = text.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def sparse(path, size: int, prefix: bytes = b""):
    """A file of `size` bytes that takes no disk: `prefix`, then a hole."""
    with open(path, "wb") as f:
        f.write(prefix)
        f.truncate(size)


def layer_names(count: int) -> list[str]:
    per_layer = ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                 "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                 "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", "extra.weight"]
    return [f"model.layers.{i // len(per_layer)}.{per_layer[i % len(per_layer)]}" for i in range(count)]


def zero_size_tensors(directory, count: int, escaped: bool = False):
    """`count` zero-size tensors named as layers, with a config.json claiming as many layers."""
    (directory / "model.safetensors").unlink()
    write_header(directory / "model.safetensors", layer_names(count), "data_offsets_escaped" if escaped else
                 "data_offsets")
    edit_config(directory, num_hidden_layers=count // 10)


def index_of(directory, tensors: int, shards: int):
    """A sharded checkpoint's index naming `tensors` tensors spread over `shards` files (none of which exist)."""
    (directory / "model.safetensors").unlink()
    weight_map = {f"model.layers.{i}.w": f"s{i % shards}.safetensors" for i in range(tensors)}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


CASES = {
    "200k_zero_size_tensors": (lambda d: zero_size_tensors(d, 200_000), "header of"),
    "20k_zero_size_tensors": (lambda d: zero_size_tensors(d, 20_000), "MAX_TENSORS"),
    "20k_tensors_escaped_keys": (lambda d: zero_size_tensors(d, 20_000, escaped=True), "MAX_TENSORS"),
    "qwen3_head_dim_2_27": (lambda d: (save_model(TinyLlama(QWEN3), d), edit_config(d, head_dim=2**27)), "shape"),
    "a_billion_layers": (lambda d: edit_config(d, num_hidden_layers=10**9), "num_hidden_layers"),
    "vocab_10_12": (lambda d: edit_config(d, vocab_size=10**12), "shape"),
    "rope_theta_10_400": (lambda d: (d / "config.json").write_text(
        (d / "config.json").read_text().replace('"rope_theta": 10000.0', '"rope_theta": 1' + "0" * 400)),
        "rope_theta"),
    "config_json_64mb": (lambda d: sparse(d / "config.json", 64 * 2**20, b'{"model_type": "llama"'), "bytes"),
    "header_claims_a_terabyte": (lambda d: sparse(d / "model.safetensors", 4096, struct.pack("<Q", 2**40)),
                                 "header of"),
    "header_of_50mb": (lambda d: sparse(d / "model.safetensors", 60 * 2**20, struct.pack("<Q", 50 * 2**20) + b"{"),
                       "header of"),
    "index_of_5mb": (lambda d: ((d / "model.safetensors").unlink(),
                                sparse(d / "model.safetensors.index.json", 5 * 2**20, b'{"weight_map": {')),
                     "bytes"),
    "index_of_50k_tensors": (lambda d: index_of(d, 50_000, 10), "MAX_TENSORS"),
    "index_of_5k_shards": (lambda d: index_of(d, 5_000, 5_000), "MAX_SHARDS"),
    "tokenizer_json_100mb": (lambda d: sparse(d / "tokenizer.json", 100 * 2**20, b"{"), "bytes"),
}


def nothing_built(monkeypatch):
    """From now on, building any model (even on meta) or a RoPE table fails the test."""
    def refuse_to_build(*args, **kwargs):
        raise AssertionError("a model (or its RoPE table) was built before the checkpoint was refused")
    monkeypatch.setattr(model_io, "TinyLlama", refuse_to_build)
    monkeypatch.setattr(llama, "RotaryEmbedding", refuse_to_build)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_checkpoint_is_refused_before_anything_is_built(model_dir, monkeypatch, case):
    """Each hostile folder raises ValueError naming the problem, with no model built, Python memory under
    PYTHON_PEAK and a bounded number of Python steps."""
    make, message = CASES[case]
    make(model_dir)
    nothing_built(monkeypatch)
    tracemalloc.start()
    try:
        with call_budget(WORK), pytest.raises(ValueError, match=message):
            load_model(model_dir)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PYTHON_PEAK, f"{peak:,} bytes of Python objects allocated before the refusal"


def test_the_tiny_model_still_loads_under_the_same_bounds(model_dir):
    """The control: a sound checkpoint passes every new bound and loads with its exact weights."""
    model, _ = load_model(model_dir)
    torch.manual_seed(0)
    reference = TinyLlama(TINY)
    for name, tensor in reference.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


JSON_VALUES = [None, True, 0, -1, 1.5, 10**400, "llama", "", [], ["llama"], [1, 2], {}, {"rope_type": "llama3"},
               {"a": []}, "sliding_attention", ["sliding_attention"], 2**27]
FIELDS = ["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
          "vocab_size", "hidden_act", "mlp_bias", "use_sliding_window", "layer_types", "rope_parameters",
          "rope_scaling", "rope_theta", "tie_word_embeddings", "bos_token_id", "eos_token_id", "rms_norm_eps",
          "attention_bias", "max_position_embeddings"]


@pytest.mark.parametrize("field", FIELDS)
def test_any_json_value_in_a_config_field_is_a_config_or_a_value_error(tmp_path, field):
    """Every JSON type in each field config.json's reader looks at: a ModelConfig holding a valid config, or a
    ValueError (never a TypeError or OverflowError a page would show as a traceback)."""
    from paged.model.hf_config import config_from_hf_dict

    base = {"model_type": "llama", "vocab_size": 61, "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
    for value in JSON_VALUES:
        raw = {**base, field: value}
        try:
            config = config_from_hf_dict(raw, tmp_path / "config.json")
        except ValueError:
            continue
        assert isinstance(config, ModelConfig) and config.num_attention_heads % config.num_key_value_heads == 0
