"""Save and load HF-style model directories: config.json + model.safetensors (+ optional tokenizer.json).

The layout and names are transformers' own, so `LlamaForCausalLM.from_pretrained(dir)` reads what we write and we
read what it writes (for the Llama features we implement). Weights go through safetensors only: loading a
checkpoint never unpickles anything.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import fields
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from paged.config import ModelConfig
from paged.model.llama import TinyLlama
from paged.model.tokenizer import ByteTokenizer, HFTokenizer

DEFAULT_DIR = Path(__file__).resolve().parent / "weights"
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"  # sharded checkpoints: {"weight_map": {tensor name: file}}
TOKENIZER_NAME = "tokenizer.json"

# Fields without which the shapes are unknown.
REQUIRED_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
# What transformers' LlamaConfig assumes when a field is absent, so we build the same model it would.
HF_DEFAULTS = {"max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
               "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}


def config_to_hf_dict(config: ModelConfig) -> dict:
    """ModelConfig -> the dict written as config.json (LlamaConfig field names, readable by transformers 4 and 5)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **config.to_dict(),
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},  # transformers >= 5
        "initializer_range": 0.02,
    }


def config_from_hf_dict(raw: object, where: Path) -> ModelConfig:
    """config.json contents -> ModelConfig. Unknown fields are ignored; anything we cannot run is a ValueError."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("model_type") != "llama":
        raise ValueError(f"{where}: model_type must be 'llama', got {raw.get('model_type')!r}")
    missing = [name for name in REQUIRED_FIELDS if name not in raw]
    if missing:
        raise ValueError(f"{where}: missing required field(s): {', '.join(missing)}")
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ValueError(f"{where}: rope_parameters must be an object, got {rope!r}")
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise ValueError(f"{where}: only default RoPE is supported, got {rope!r}")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act must be 'silu', got {raw['hidden_act']!r}")
    if raw.get("attention_bias") or raw.get("mlp_bias"):
        raise ValueError(f"{where}: attention_bias / mlp_bias are not supported")
    values = {**HF_DEFAULTS, "num_key_value_heads": raw["num_attention_heads"]}
    values.update({f.name: raw[f.name] for f in fields(ModelConfig) if f.name in raw})
    if "rope_theta" in rope:
        values["rope_theta"] = rope["rope_theta"]
    for name in ("bos_token_id", "eos_token_id"):  # some checkpoints list several; generation stops on the first
        if isinstance(values[name], list):
            values[name] = values[name][0] if values[name] else None
    config = ModelConfig(**values)  # validates itself (ValueError naming the field)
    if raw.get("head_dim", config.head_dim) != config.head_dim:
        raise ValueError(f"{where}: head_dim {raw['head_dim']} != hidden_size / num_attention_heads "
                         f"({config.head_dim}); a separate head_dim is not supported")
    return config


def save_model(model: TinyLlama, path: str | Path, tokenizer=None) -> Path:
    """Write `model` as an HF-style directory (created if needed); also the tokenizer's file if it has one."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    raw = {**config_to_hf_dict(model.config),
           "torch_dtype": str(next(model.parameters()).dtype).removeprefix("torch.")}  # what the file holds
    (path / CONFIG_NAME).write_text(json.dumps(raw, indent=2) + "\n")
    state = {name: t.detach().contiguous().cpu() for name, t in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight")  # shared with embed_tokens; safetensors refuses aliased tensors
    save_file(state, str(path / WEIGHTS_NAME), metadata={"format": "pt"})
    if tokenizer is not None:
        tokenizer.save(path)
    return path


def _read_config(path: Path) -> ModelConfig:
    config_path = path / CONFIG_NAME
    if not config_path.is_file():
        raise FileNotFoundError(f"{path}: no {CONFIG_NAME} in this directory")
    try:
        raw = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{config_path}: malformed JSON ({e})") from e
    return config_from_hf_dict(raw, config_path)


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    if (path / WEIGHTS_NAME).is_file():
        return load_file(str(path / WEIGHTS_NAME))
    if (path / INDEX_NAME).is_file():
        try:
            weight_map = json.loads((path / INDEX_NAME).read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path / INDEX_NAME}: malformed index ({e!r})") from e
        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(set(weight_map.values())):
            if not (path / shard).is_file():
                raise FileNotFoundError(f"{path}: shard {shard} named in {INDEX_NAME} is missing")
            tensors.update(load_file(str(path / shard)))
        return tensors
    raise FileNotFoundError(f"{path}: no {WEIGHTS_NAME} (or {INDEX_NAME}) in this directory")


def _check_tensors(model: TinyLlama, tensors: dict[str, torch.Tensor], path: Path) -> None:
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    optional = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    # Old checkpoints carry the derived RoPE table; it is recomputed from the config, so ignore it.
    found = {n: t for n, t in tensors.items() if not n.endswith("rotary_emb.inv_freq")}
    missing = sorted(set(expected) - set(found) - optional)
    if missing:
        raise ValueError(f"{path}: missing tensor(s): {', '.join(missing[:8])}"
                         + (f" (+{len(missing) - 8} more)" if len(missing) > 8 else ""))
    unexpected = sorted(set(found) - set(expected))
    if unexpected:
        raise ValueError(f"{path}: unexpected tensor(s): {', '.join(unexpected[:8])}")
    for name, t in found.items():
        if tuple(t.shape) != expected[name]:
            raise ValueError(f"{path}: tensor {name} has shape {tuple(t.shape)}, expected {expected[name]}")


def _load_tokenizer(path: Path, config: ModelConfig):
    if (path / TOKENIZER_NAME).is_file():
        try:
            return HFTokenizer.from_file(path / TOKENIZER_NAME, config.bos_token_id, config.eos_token_id)
        except ImportError:
            warnings.warn(f"{path / TOKENIZER_NAME} found but the `tokenizers` package is not installed; "
                          "falling back to the byte tokenizer", stacklevel=3)
    return ByteTokenizer()


def load_model(path: str | Path | None = None, device: str | torch.device | None = None,
               dtype: torch.dtype = torch.float32) -> tuple[TinyLlama, ByteTokenizer | HFTokenizer]:
    """Load an HF-style Llama directory (default: the shipped model) -> (model in eval mode, tokenizer).

    Raises FileNotFoundError (directory, config.json or weights missing) or ValueError (malformed config,
    model_type not llama, missing / unexpected / wrongly shaped tensors), each naming the path.
    """
    path = DEFAULT_DIR if path is None else Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: model directory does not exist")
    config = _read_config(path)
    tensors = _read_tensors(path)
    # Built on the CPU, not on "meta": random init of a tiny model takes milliseconds, while the first init on meta
    # imports torch._dynamo (seconds). assign=True below then swaps the loaded tensors in without a copy.
    model = TinyLlama(config)
    _check_tensors(model, tensors, path)
    model.load_state_dict(tensors, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model = model.to(device=device, dtype=dtype).eval()
    return model, _load_tokenizer(path, config)
