"""Save and load HF-style model directories: config.json + model.safetensors (+ tokenizer.json).

The layout and names are transformers' own, so `AutoModelForCausalLM.from_pretrained(dir)` reads
what we write and we read what it writes (the architectures of hf_config.py). Weights go through
safetensors only: loading a checkpoint never unpickles anything.

load_model checks the whole directory before it allocates a weight: every file it opens stays
inside the directory, every JSON parses, and the safetensors headers hold exactly the tensors
(names, shapes, float dtypes) config.json implies, with enough memory free to hold them. Only
then are the tensors read.
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
# allow-list of model directories for the app, os.pathsep-separated
MODEL_DIRS_ENV = "PAGED_MODEL_DIRS"


def save_model(model: TinyLlama, path: str | Path, tokenizer=None) -> Path:
    """Write `model` as an HF-style directory (created if needed), with the tokenizer's file if any.

    Raises: ValueError if the config cannot be written as config.json (see config_to_hf_dict).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    raw = {**config_to_hf_dict(model.config),
           # what the file holds
           "torch_dtype": str(next(model.parameters()).dtype).removeprefix("torch.")}
    (path / CONFIG_NAME).write_text(json.dumps(raw, indent=2) + "\n")
    state = {name: t.detach().contiguous().cpu() for name, t in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        # shared with embed_tokens; safetensors refuses aliased tensors
        state.pop("lm_head.weight")
    save_file(state, str(path / WEIGHTS_NAME), metadata={"format": "pt"})
    if tokenizer is not None:
        tokenizer.save(path)
    return path


def read_config(path: Path) -> ModelConfig:
    """The ModelConfig of the directory `path`.

    Raises: FileNotFoundError without config.json; ValueError if it is unusable.
    """
    if not (path / CONFIG_NAME).is_file():
        raise FileNotFoundError(f"{path}: no {CONFIG_NAME} in this directory")
    config_path = inside(path, CONFIG_NAME)
    return config_from_hf_dict(read_json(config_path), config_path)


def _check_tensors(config: ModelConfig, found: dict[str, TensorInfo], path: Path) -> None:
    """Check that the headers hold exactly the tensors `config` implies, with the same shapes.

    Pure arithmetic on the config's numbers (paged.model.shapes): no model is built, not even on
    "meta", so a config claiming 10**9 layers or a head_dim of 2**27 costs nothing before it is
    refused. The headers are bounded (checkpoint.MAX_TENSORS), so once the layer counts agree the
    expected list is too.
    Raises: ValueError if a layer count, a name or a shape disagrees (naming it).
    """
    # Old checkpoints carry the derived RoPE table; it is recomputed from the config: ignore it.
    found = {n: t for n, t in found.items() if not n.endswith("rotary_emb.inv_freq")}
    # Layers first, from names alone: a config claiming more layers than the weights back is
    # refused before a single expected name is listed.
    layers = {n.split(".")[2] for n in found
              if n.startswith("model.layers.") and n.split(".")[2].isdigit()}
    if len(layers) != config.num_hidden_layers:
        raise ValueError(f"{path}: config.json says num_hidden_layers "
                         f"{config.num_hidden_layers}, the weights hold "
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
            raise ValueError(f"{path}: tensor {name} has shape {info.shape}, "
                             f"config.json implies {expected[name]}")


def available_memory_bytes() -> int | None:
    """Bytes this process could still allocate: MemAvailable, capped by a cgroup v2 limit.

    None if neither can be read.
    """
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
    """A checkpoint refused: its weights do not fit in the memory free now (they may fit later)."""


def _check_memory(found: dict[str, TensorInfo], dtype: torch.dtype, path: Path) -> None:
    """Check that the weights (as `dtype`, plus the file's copy while converting) fit in memory.

    Raises: NotEnoughMemory (a ValueError) if they need more than is available now.
    """
    sizes = {"F32": 4, "F16": 2, "BF16": 2}
    itemsize = torch.empty(0, dtype=dtype).element_size()
    need = sum(t.numel * (itemsize + (sizes[t.dtype] if sizes[t.dtype] != itemsize else 0))
               for t in found.values())
    available = available_memory_bytes()
    if available is not None and need > available:
        raise NotEnoughMemory(f"{path}: loading needs {need / 2**30:.1f} GiB "
                              f"({sum(t.numel for t in found.values()):,} "
                              f"parameters as {str(dtype).removeprefix('torch.')}) but only "
                              f"{available / 2**30:.1f} GiB of memory is available")


def load_model(path: str | Path | None = None, device: str | torch.device | None = None,
               dtype: torch.dtype = torch.float32) -> tuple[TinyLlama, ByteTokenizer | HFTokenizer]:
    """Load an HF-style checkpoint directory (default: the shipped model) -> (model, tokenizer).

    The model is in eval mode; the tokenizer is the directory's tokenizer.json, else the byte one.
    dtype is the compute dtype: float32 whatever the file holds (bf16 / fp16 weights are upcast:
    reduced-precision CPU matmuls are slow and every parity check here is fp32); torch.bfloat16
    halves the memory.
    Raises: FileNotFoundError (directory, config.json or weights missing) or ValueError (bad
    config, file outside the directory, bad weights, tensors unlike config.json, no memory).
    """
    path = DEFAULT_DIR if path is None else Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: model directory does not exist")
    config = read_config(path)
    found = checkpoint_tensors(path)
    _check_tensors(config, found, path)
    _check_memory(found, dtype, path)
    tokenizer = load_hf_tokenizer(path, config) or ByteTokenizer()
    # the real tensors are swapped in below (assign=True)
    model = TinyLlama(config, device="meta")
    for file in sorted({info.file for info in found.values()}):
        # the headers passed our checks; the library checks the rest (e.g. overlapping byte ranges)
        try:
            tensors = {n: t for n, t in load_file(str(file)).items()
                       if not n.endswith("rotary_emb.inv_freq")}
        except SafetensorError as e:
            raise ValueError(f"{file}: malformed safetensors file ({e})") from e
        model.load_state_dict({n: t.to(dtype) for n, t in tensors.items()}, strict=False,
                              assign=True)
        del tensors
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    assert not any(p.is_meta for p in model.parameters()), "a parameter was left unloaded"
    model = model.to(device=device).eval()
    # the checkpoint's tensors are row-major and apart: see TinyLlama.arrange_weights
    model.arrange_weights()
    return model, tokenizer


def allowed_model_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The model directories the app may offer, from PAGED_MODEL_DIRS in `environ` (os.environ).

    Entries are os.pathsep-separated, each resolved to an absolute path and kept only if it is a
    directory holding a config.json; duplicates and anything else are dropped ([] when unset).
    """
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
