"""Save and load HF-style model directories: config.json + model.safetensors (+ optional tokenizer.json).

The layout and names are transformers' own, so `AutoModelForCausalLM.from_pretrained(dir)` reads what we write and
we read what it writes, for LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (see hf_config.py). Weights go
through safetensors only: loading a checkpoint never unpickles anything.

load_model checks the whole directory before it allocates a weight: every file it opens stays inside the directory,
every JSON parses, and the safetensors headers hold exactly the tensors (names, shapes, float dtypes) that
config.json implies, with enough memory free to hold them. Only then are the tensors read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from paged.config import ModelConfig
from paged.model.checkpoint import WEIGHTS_NAME, TensorInfo, checkpoint_tensors, inside, read_json
from paged.model.hf_config import config_from_hf_dict, config_to_hf_dict
from paged.model.llama import TinyLlama
from paged.model.shapes import tensor_shapes
from paged.model.tokenizer import ByteTokenizer, HFTokenizer, load_hf_tokenizer

DEFAULT_DIR = Path(__file__).resolve().parent / "weights"
CONFIG_NAME = "config.json"
MODEL_DIRS_ENV = "PAGED_MODEL_DIRS"  # allow-list of model directories for the app, os.pathsep-separated


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


def read_config(path: Path) -> ModelConfig:
    """The ModelConfig of the directory `path` (FileNotFoundError without config.json, ValueError if unusable)."""
    if not (path / CONFIG_NAME).is_file():
        raise FileNotFoundError(f"{path}: no {CONFIG_NAME} in this directory")
    config_path = inside(path, CONFIG_NAME)
    return config_from_hf_dict(read_json(config_path), config_path)


def _check_tensors(config: ModelConfig, found: dict[str, TensorInfo], path: Path) -> None:
    """Refuse (ValueError) unless the headers hold exactly the tensors `config` implies, with the same shapes.

    Pure arithmetic on the config's numbers (paged.model.shapes): no model is built, not even on "meta", so a
    config claiming 10**9 layers or a head_dim of 2**27 costs nothing before it is refused. The headers are
    bounded (checkpoint.MAX_TENSORS), so the expected list is too once the layer counts agree."""
    # Old checkpoints carry the derived RoPE table; it is recomputed from the config, so ignore it.
    found = {n: t for n, t in found.items() if not n.endswith("rotary_emb.inv_freq")}
    # Layers first, from names alone: a config claiming more layers than the weights back is refused before a
    # single expected name is listed.
    layers = {n.split(".")[2] for n in found if n.startswith("model.layers.") and n.split(".")[2].isdigit()}
    if len(layers) != config.num_hidden_layers:
        raise ValueError(f"{path}: config.json says num_hidden_layers {config.num_hidden_layers}, the weights hold "
                         f"{len(layers)} layer(s)")
    expected = tensor_shapes(config)
    optional = {"lm_head.weight"} if config.tie_word_embeddings else set()
    missing = sorted(set(expected) - set(found) - optional)
    if missing:
        raise ValueError(f"{path}: missing tensor(s): {', '.join(missing[:8])}"
                         + (f" (+{len(missing) - 8} more)" if len(missing) > 8 else ""))
    unexpected = sorted(set(found) - set(expected))
    if unexpected:
        raise ValueError(f"{path}: unexpected tensor(s): {', '.join(unexpected[:8])}")
    for name, info in found.items():
        if info.shape != expected[name]:
            raise ValueError(f"{path}: tensor {name} has shape {info.shape}, config.json implies {expected[name]}")


def available_memory_bytes() -> int | None:
    """Memory this process could still allocate: the kernel's MemAvailable, capped by a cgroup v2 limit (None if
    neither can be read)."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            available = min(available or 1 << 62, int(limit) - used)
    except (OSError, ValueError):
        pass
    return available


class NotEnoughMemory(ValueError):
    """A checkpoint refused because its weights do not fit in the memory free now (it may fit later)."""


def _check_memory(found: dict[str, TensorInfo], dtype: torch.dtype, path: Path) -> None:
    """Refuse a checkpoint whose weights (as `dtype`, plus the file's copy while converting) cannot fit."""
    sizes = {"F32": 4, "F16": 2, "BF16": 2}
    itemsize = torch.empty(0, dtype=dtype).element_size()
    need = sum(t.numel * (itemsize + (sizes[t.dtype] if sizes[t.dtype] != itemsize else 0)) for t in found.values())
    available = available_memory_bytes()
    if available is not None and need > available:
        raise NotEnoughMemory(f"{path}: loading needs {need / 2**30:.1f} GiB ({sum(t.numel for t in found.values()):,} "
                         f"parameters as {str(dtype).removeprefix('torch.')}) but only {available / 2**30:.1f} GiB "
                         "of memory is available")


def load_model(path: str | Path | None = None, device: str | torch.device | None = None,
               dtype: torch.dtype = torch.float32) -> tuple[TinyLlama, ByteTokenizer | HFTokenizer]:
    """Load an HF-style Llama / Qwen2 / Qwen3 directory (default: the shipped model) -> (model in eval mode,
    tokenizer: the directory's tokenizer.json, else the byte tokenizer).

    dtype is the compute dtype: float32 by default whatever the file holds (bf16 / fp16 weights are upcast, since
    CPU matmuls in reduced precision are slow on most CPUs and every parity check here is in fp32); pass
    torch.bfloat16 to halve the memory. Raises FileNotFoundError (directory, config.json or weights missing) or
    ValueError (malformed or unsupported config, a file outside the directory, truncated or malformed weights,
    tensors that do not match config.json, not enough memory), each naming the path.
    """
    path = DEFAULT_DIR if path is None else Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: model directory does not exist")
    config = read_config(path)
    found = checkpoint_tensors(path)
    _check_tensors(config, found, path)
    _check_memory(found, dtype, path)
    tokenizer = load_hf_tokenizer(path, config) or ByteTokenizer()
    model = TinyLlama(config, device="meta")  # the real tensors are swapped in below (assign=True)
    for file in sorted({info.file for info in found.values()}):
        try:  # the headers passed our checks; the library checks the rest (e.g. overlapping byte ranges)
            tensors = {n: t for n, t in load_file(str(file)).items() if not n.endswith("rotary_emb.inv_freq")}
        except SafetensorError as e:
            raise ValueError(f"{file}: malformed safetensors file ({e})") from e
        model.load_state_dict({n: t.to(dtype) for n, t in tensors.items()}, strict=False, assign=True)
        del tensors
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    assert not any(p.is_meta for p in model.parameters()), "a parameter was left unloaded"
    model = model.to(device=device).eval()
    model.arrange_weights()  # the checkpoint's tensors are row-major and apart: see TinyLlama.arrange_weights
    return model, tokenizer


def allowed_model_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The model directories the app may offer: PAGED_MODEL_DIRS (os.pathsep-separated) in `environ` (default
    os.environ), each resolved to an absolute path and kept only if it is a directory holding a config.json;
    duplicates and everything else are dropped. Returns [] when the variable is unset or empty."""
    environ = os.environ if environ is None else environ
    dirs: list[Path] = []
    for entry in environ.get(MODEL_DIRS_ENV, "").split(os.pathsep):
        if not entry.strip():
            continue
        try:
            candidate = Path(entry.strip()).expanduser().resolve()
        except (OSError, RuntimeError):  # a symlink loop
            continue
        if candidate.is_dir() and (candidate / CONFIG_NAME).is_file() and candidate not in dirs:
            dirs.append(candidate)
    return dirs
