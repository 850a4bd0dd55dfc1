"""transformers' config.json <-> ModelConfig, for Llama, Qwen2, Qwen3 and Mistral (...ForCausalLM).

The four share one decoder (see llama.py; Mistral is a Llama with a sliding window); a config.json
only decides the sizes and a few switches. One sliding window on every layer (Mistral, Qwen2's
use_sliding_window) becomes ModelConfig.sliding_window (paged/chapters/window.py runs it).
Anything we cannot run exactly as transformers would (another activation, RoPE scaling other than
"default" / "llama3", a per-layer mix of sliding and full attention, MLP bias) is refused with a
ValueError naming the field, never approximated.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from paged.config import ModelConfig

ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}
# Fields without which the shapes are unknown.
REQUIRED_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                   "num_attention_heads")
# What each transformers config class assumes when a field is absent, so we build the same model.
HF_DEFAULTS = {
    "llama": {"max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2},
    "qwen2": {"max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": None},
    "qwen3": {"max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": None,
              "head_dim": 128},
    "mistral": {"max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
                "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
                "num_key_value_heads": 8},
}
LLAMA3_KEYS = {"factor": "rope_factor", "low_freq_factor": "rope_low_freq_factor",
               "high_freq_factor": "rope_high_freq_factor",
               "original_max_position_embeddings": "rope_original_max_position_embeddings"}
LAYER_TYPES = ("full_attention", "sliding_attention")


def _rope_fields(raw: dict, where: Path) -> dict:
    """RoPE settings from `rope_parameters` (transformers >= 5) or `rope_scaling` + `rope_theta`.

    Raises: ValueError if the RoPE type or a setting is not supported (naming it).
    """
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ValueError(f"{where}: rope_parameters / rope_scaling must be an object, "
                         f"got {rope!r}")
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "llama3"):
        raise ValueError(f"{where}: RoPE type {rope_type!r} is not supported "
                         "(only 'default' and 'llama3')")
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"{where}: partial_rotary_factor {rope['partial_rotary_factor']!r} "
                         "is not supported")
    out = {"rope_type": rope_type}
    theta = rope.get("rope_theta", raw.get("rope_theta"))
    if theta is not None:
        out["rope_theta"] = theta
    if rope_type == "llama3":
        missing = [key for key in LLAMA3_KEYS if key not in rope]
        if missing:
            raise ValueError(f"{where}: llama3 RoPE scaling needs {', '.join(missing)}")
        out.update({ours: rope[key] for key, ours in LLAMA3_KEYS.items()})
    return out


def _first_id(value: object) -> object:
    """Some checkpoints list several eos ids; generation here stops on the first."""
    return (value[0] if value else None) if isinstance(value, list) else value


def _layer_types(raw: dict, where: Path) -> list[str]:
    """config.json's layer_types (absent: []), each "full_attention" or "sliding_attention".

    Raises: ValueError if layer_types is not such a list.
    """
    layer_types = raw.get("layer_types") or []
    if not isinstance(layer_types, list) or any(not isinstance(t, str) or t not in LAYER_TYPES
                                                for t in layer_types):
        raise ValueError(f"{where}: layer_types must be a list of {' / '.join(LAYER_TYPES)}, "
                         f"got {layer_types!r}")
    return layer_types


def sliding_window_of(raw: dict, model_type: str, where: Path) -> int | None:
    """The one window every layer uses (None: full attention), read as transformers 5.19 reads it.

    Mistral's sliding_window (absent: 4096, null: off); Qwen2's only with use_sliding_window, on
    layers from max_window_layers (absent: 28) on, or as layer_types lists them. Llama and Qwen3
    here run full attention only.
    Raises: ValueError if layers mix sliding and full attention, or a value is bad (naming it).
    """
    layer_types = _layer_types(raw, where)
    use = raw.get("use_sliding_window", False)
    if not isinstance(use, bool):
        raise ValueError(f"{where}: use_sliding_window must be true or false, got {use!r}")
    if model_type in ("llama", "qwen3"):
        if use or "sliding_attention" in layer_types:
            raise ValueError(f"{where}: sliding-window attention (use_sliding_window / "
                             f"layer_types) is not supported for {model_type}: load it as "
                             "mistral or qwen2, or drop the window")
        return None
    window = raw.get("sliding_window", 4096) if model_type == "mistral" or use else None
    if window is not None and (type(window) is not int or window < 1):
        raise ValueError(f"{where}: sliding_window must be an integer >= 1 or null, "
                         f"got {window!r}")
    if model_type == "qwen2" and window is not None and not layer_types:
        first = raw.get("max_window_layers", 28)
        if type(first) is not int or first < 0:
            raise ValueError(f"{where}: max_window_layers must be an integer >= 0, "
                             f"got {first!r}")
        layer_types = ["sliding_attention" if i >= first else "full_attention"
                       for i in range(raw["num_hidden_layers"]
                                      if type(raw["num_hidden_layers"]) is int else 0)]
    kinds = set(layer_types)
    if len(kinds) > 1:
        raise ValueError(f"{where}: a per-layer mix of sliding and full attention "
                         "(layer_types / max_window_layers) is not supported; here every layer "
                         "attends the same way")
    if "sliding_attention" in kinds and window is None:
        raise ValueError(f"{where}: layer_types names sliding_attention but no sliding_window "
                         "is set (use_sliding_window false or sliding_window null)")
    if model_type == "qwen2" and kinds == {"full_attention"}:
        return None  # the window is set but no layer uses it
    if model_type == "mistral" and kinds == {"full_attention"}:
        raise ValueError(f"{where}: layer_types says full_attention but MistralForCausalLM "
                         "applies sliding_window to every layer; set sliding_window to null for "
                         "full attention")
    return window


def config_from_hf_dict(raw: object, where: Path) -> ModelConfig:
    """config.json contents -> ModelConfig; unknown fields are ignored.

    Raises: ValueError naming `where` and the field for anything we cannot run.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    model_type = raw.get("model_type")
    # (a list is not even hashable)
    if not isinstance(model_type, str) or model_type not in ARCHITECTURES:
        raise ValueError(f"{where}: model_type must be one of "
                         f"{', '.join(map(repr, ARCHITECTURES))} "
                         f"({', '.join(ARCHITECTURES.values())}), got {model_type!r}")
    missing = [name for name in REQUIRED_FIELDS if name not in raw]
    if missing:
        raise ValueError(f"{where}: missing required field(s): {', '.join(missing)}")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act must be 'silu', got {raw['hidden_act']!r}")
    if raw.get("mlp_bias"):
        raise ValueError(f"{where}: mlp_bias is not supported")
    # ValueError for what one window cannot describe
    window = sliding_window_of(raw, model_type, where)
    values = {"num_key_value_heads": raw["num_attention_heads"], **HF_DEFAULTS[model_type]}
    values.update({f.name: raw[f.name] for f in fields(ModelConfig) if raw.get(f.name) is not None})
    values.update(_rope_fields(raw, where), sliding_window=window)
    if model_type in ("qwen2", "mistral"):
        # not their field: Qwen2's q/k/v bias comes with the type, Mistral has none
        values.pop("attention_bias", None)
    values.update(bos_token_id=_first_id(raw.get("bos_token_id", values["bos_token_id"])),
                  eos_token_id=_first_id(raw.get("eos_token_id", values["eos_token_id"])))
    try:
        return ModelConfig(**values)  # validates itself (ValueError naming the field)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e


def config_to_hf_dict(config: ModelConfig) -> dict:
    """ModelConfig -> the dict written as config.json (field names transformers 4 and 5 both read).

    Raises: ValueError if a sliding window is set on a type without one (llama, qwen3).
    """
    rope = {"rope_type": config.rope_type, "rope_theta": config.rope_theta}
    if config.rope_type == "llama3":
        rope.update({key: getattr(config, ours) for key, ours in LLAMA3_KEYS.items()})
    out = {"architectures": [ARCHITECTURES[config.model_type]],
           **{k: v for k, v in config.to_dict().items() if not k.startswith("rope_")},
           "rope_theta": config.rope_theta, "hidden_act": "silu", "mlp_bias": False,
           "rope_scaling": None if config.rope_type == "default" else rope,
           "rope_parameters": rope,  # transformers >= 5
           "initializer_range": 0.02}
    if config.model_type in ("qwen2", "mistral"):
        del out["attention_bias"]  # implied by the model type
    window = out.pop("sliding_window")
    if config.model_type == "mistral":
        out["sliding_window"] = window  # null: full attention
    elif config.model_type == "qwen2":
        out.update(use_sliding_window=window is not None, sliding_window=window,
                   max_window_layers=0)
    elif window is not None:
        raise ValueError(f"{ARCHITECTURES[config.model_type]} has no sliding window "
                         f"(sliding_window {window}); save it as model_type 'mistral' "
                         "(a Llama with a window) instead")
    return out
