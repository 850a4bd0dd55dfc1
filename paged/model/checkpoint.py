"""Reading a model directory without trusting it: files that stay inside, JSON that parses, safetensors headers.

Everything here runs before a single weight is read or a model is built, so a directory that cannot work (a
config.json describing a bigger model than its weights, a truncated file, an index pointing outside the directory)
is refused in milliseconds with a ValueError naming the file, instead of after gigabytes of allocation.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, then the raw tensor bytes
(offsets are relative to the end of the header). Reading that JSON gives every name, shape and dtype for free.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

INDEX_NAME = "model.safetensors.index.json"  # sharded checkpoints: {"weight_map": {tensor name: file}}
WEIGHTS_NAME = "model.safetensors"
# Bounds on what a directory may make us parse before anything is checked, far above any real checkpoint (a 70B
# Llama shard's header is ~30 KB and lists < 1,000 tensors; its config.json and index are < 100 KB): a hostile
# header of 200,000 tensors is refused from its length or its entry count, before one JSON object is built.
MAX_HEADER_BYTES = 4 * 2**20  # a safetensors header (the safetensors library itself allows 100 MB)
MAX_TENSORS = 16_384  # tensors in one checkpoint, all shards together
MAX_SHARDS = 1_024  # files an index may name (Llama 3.1 405B has 191)
MAX_JSON_BYTES = 4 * 2**20  # config.json, the shard index, generation_config.json, tokenizer_config.json
# Floating-point weights only: quantized checkpoints (int8, fp8, ...) need kernels this project does not have.
FLOAT_DTYPES = {"F32": 4, "F16": 2, "BF16": 2}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as a safetensors header describes it."""

    file: Path
    dtype: str  # "F32", "F16" or "BF16"
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def read_json(path: Path) -> dict:
    """The JSON object in `path`. Raises ValueError naming the file when it is not UTF-8, not JSON, nested too
    deeply for the parser (RecursionError), not an object, or larger than MAX_JSON_BYTES (checked before reading)."""
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise ValueError(f"{path}: {size:,} bytes, more than the {MAX_JSON_BYTES:,} a model's JSON file may hold")
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: malformed JSON ({e})") from e
    except RecursionError as e:
        raise ValueError(f"{path}: malformed JSON (nested too deeply to parse)") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    return raw


def allowed_roots(directory: Path) -> list[Path]:
    """Where files of `directory` may really live: the directory itself and, for a Hugging Face hub cache snapshot
    (…/snapshots/<revision>/, whose files are symlinks into …/blobs/), that repository's blobs folder."""
    root = directory.resolve()
    roots = [root]
    if root.parent.name == "snapshots":
        roots.append(root.parent.parent / "blobs")
    return roots


def inside(directory: Path, name: str) -> Path:
    """directory / name, refused (ValueError) unless it resolves inside the directory: no absolute paths, no `..`
    out, no symlink leading elsewhere (a hub cache snapshot's own blobs excepted, see allowed_roots)."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"{directory}: file name {name!r} is not a plain relative path")
    target = (directory / name).resolve()
    if not any(target.is_relative_to(root) for root in allowed_roots(directory)):
        raise ValueError(f"{directory}: {name!r} resolves to {target}, outside the model directory; refusing it")
    return target


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """name -> TensorInfo from a safetensors file's header, checked against the file's size (no tensor is read).

    Raises ValueError naming the file when it is truncated, its header is longer than MAX_HEADER_BYTES or lists
    more than MAX_TENSORS tensors (both checked before the JSON is parsed), its header is not valid JSON, an entry
    is malformed or overlaps the end of the file, or a tensor is not F32 / F16 / BF16.
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path}: truncated safetensors file ({size} bytes, not even a header length)")
        n = int.from_bytes(prefix, "little")
        if n > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: safetensors header of {n:,} bytes, more than the {MAX_HEADER_BYTES:,} this "
                             "loader reads (real checkpoints need a few KB)")
        if 8 + n > size:
            raise ValueError(f"{path}: truncated or corrupt safetensors file (header of {n} bytes, file of {size})")
        header_bytes = f.read(n)
    entries = header_bytes.count(b'"data_offsets"')  # one per tensor: counted without parsing anything
    if entries > MAX_TENSORS:
        raise ValueError(f"{path}: the header lists {entries:,} tensors, more than MAX_TENSORS ({MAX_TENSORS:,})")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: malformed safetensors header ({type(e).__name__})") from e
    if not isinstance(header, dict):
        raise ValueError(f"{path}: malformed safetensors header (not a JSON object)")
    if len(header) > MAX_TENSORS + 1:  # the same bound, for a header spelling its keys with escapes
        raise ValueError(f"{path}: the header lists {len(header) - 1:,} tensors, more than MAX_TENSORS "
                         f"({MAX_TENSORS:,})")
    data_size = size - 8 - n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            ok = (isinstance(dtype, str) and isinstance(shape, list)
                  and all(type(d) is int and d >= 0 for d in shape) and type(begin) is int and type(end) is int)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"{path}: malformed safetensors header entry for {name!r}")
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}; only {', '.join(FLOAT_DTYPES)} weights are "
                             "supported (quantized checkpoints are not)")
        if not 0 <= begin <= end <= data_size:
            raise ValueError(f"{path}: truncated safetensors file (tensor {name} ends at byte {end} of the data, "
                             f"the file holds {data_size})")
        if end - begin != math.prod(shape) * FLOAT_DTYPES[dtype]:
            raise ValueError(f"{path}: tensor {name}'s byte range does not match its shape {tuple(shape)} {dtype}")
        tensors[name] = TensorInfo(path, dtype, tuple(shape))
    return tensors


def checkpoint_tensors(directory: Path) -> dict[str, TensorInfo]:
    """Every tensor of the checkpoint in `directory`: model.safetensors, or the shards its index names.

    Raises FileNotFoundError (no weights, a shard missing) or ValueError (malformed index, a shard outside the
    directory, a tensor in no shard or in two, or any header problem of read_safetensors_header).
    """
    if (directory / WEIGHTS_NAME).is_file():
        return read_safetensors_header(inside(directory, WEIGHTS_NAME))
    index_path = directory / INDEX_NAME
    if not index_path.is_file():
        raise FileNotFoundError(f"{directory}: no {WEIGHTS_NAME} (or {INDEX_NAME}) in this directory")
    weight_map = read_json(inside(directory, INDEX_NAME)).get("weight_map")
    if isinstance(weight_map, dict) and len(weight_map) > MAX_TENSORS:  # counted before anything is looked at
        raise ValueError(f"{index_path}: the index lists {len(weight_map):,} tensors, more than MAX_TENSORS "
                         f"({MAX_TENSORS:,})")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError(f"{index_path}: malformed index (weight_map must map tensor names to file names)")
    names = set(weight_map.values())
    if len(names) > MAX_SHARDS:  # before resolving a single path
        raise ValueError(f"{index_path}: the index names {len(names):,} shard files, more than MAX_SHARDS "
                         f"({MAX_SHARDS:,})")
    shards = {shard: inside(directory, shard) for shard in sorted(names)}
    tensors: dict[str, TensorInfo] = {}
    for shard, shard_path in shards.items():
        if not shard_path.is_file():
            raise FileNotFoundError(f"{directory}: shard {shard} named in {INDEX_NAME} is missing")
        for name, info in read_safetensors_header(shard_path).items():
            if name in tensors:
                raise ValueError(f"{directory}: tensor {name} is in both {tensors[name].file.name} and {shard}")
            tensors[name] = info
        if len(tensors) > MAX_TENSORS:
            raise ValueError(f"{directory}: the shards hold more than MAX_TENSORS ({MAX_TENSORS:,}) tensors")
    listed_elsewhere = sorted(n for n, shard in weight_map.items()
                              if n not in tensors or tensors[n].file != shards[shard])
    if listed_elsewhere:
        raise ValueError(f"{index_path}: tensor(s) not in the shard the index names: {', '.join(listed_elsewhere[:8])}")
    return tensors
