"""Reading a model directory without trusting it: files inside it, JSON, safetensors headers.

Everything here runs before a weight is read or a model is built, so a directory that cannot work
(a config.json bigger than its weights, a truncated file, an index pointing outside the directory)
is refused in milliseconds with a ValueError naming the file, not after gigabytes of allocation.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, then the raw
tensor bytes (offsets relative to the end of the header). That JSON gives every name, shape and
dtype for free.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

# sharded checkpoints: {"weight_map": {tensor name: file}}
INDEX_NAME = "model.safetensors.index.json"
WEIGHTS_NAME = "model.safetensors"
# Bounds on what a directory may make us parse before anything is checked, far above any real
# checkpoint (a 70B Llama shard's header is ~30 KB, < 1,000 tensors; its config.json and index are
# < 100 KB): a hostile header of 200,000 tensors is refused from its length or its entry count,
# before one JSON object is built.
MAX_HEADER_BYTES = 4 * 2**20  # a safetensors header (the safetensors library allows 100 MB)
MAX_TENSORS = 16_384  # tensors in one checkpoint, all shards together
MAX_SHARDS = 1_024  # files an index may name (Llama 3.1 405B has 191)
# config.json, the shard index, generation_config.json, tokenizer_config.json
MAX_JSON_BYTES = 4 * 2**20
# Floating-point weights only: quantized checkpoints (int8, fp8, ...) need kernels we lack.
FLOAT_DTYPES = {"F32": 4, "F16": 2, "BF16": 2}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as a safetensors header describes it."""

    file: Path
    dtype: str  # "F32", "F16" or "BF16"
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        """Number of elements: the product of the shape."""
        return math.prod(self.shape)


def read_json(path: Path) -> dict:
    """The JSON object in `path`; its size is checked against MAX_JSON_BYTES before reading.

    Raises: ValueError naming the file if it is too large, not UTF-8, not JSON, nested too deeply
    to parse, or not an object.
    """
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise ValueError(f"{path}: {size:,} bytes, more than the {MAX_JSON_BYTES:,} a model's "
                         "JSON file may hold")
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
    """Where files of `directory` may really live: the directory, and a hub snapshot's blobs.

    A Hugging Face hub cache snapshot (…/snapshots/<revision>/) holds symlinks into …/blobs/.
    """
    root = directory.resolve()
    roots = [root]
    if root.parent.name == "snapshots":
        roots.append(root.parent.parent / "blobs")
    return roots


def inside(directory: Path, name: str) -> Path:
    """directory / name, resolved, if it stays inside the directory (or its allowed_roots).

    Raises: ValueError if the name is not a plain relative path or resolves outside (absolute
    path, `..` out, a symlink leading elsewhere).
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"{directory}: file name {name!r} is not a plain relative path")
    target = (directory / name).resolve()
    if not any(target.is_relative_to(root) for root in allowed_roots(directory)):
        raise ValueError(f"{directory}: {name!r} resolves to {target}, outside the model "
                         "directory; refusing it")
    return target


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """name -> TensorInfo from a safetensors header, checked against the file size (reads none).

    The header's length (MAX_HEADER_BYTES) and entry count (MAX_TENSORS) are checked before parsing.
    Raises: ValueError naming the file if it is truncated, over a bound, its header not JSON, an
    entry malformed or past the end of the file, or a tensor not F32 / F16 / BF16.
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path}: truncated safetensors file ({size} bytes, "
                             "not even a header length)")
        n = int.from_bytes(prefix, "little")
        if n > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: safetensors header of {n:,} bytes, more than the "
                             f"{MAX_HEADER_BYTES:,} this loader reads (real checkpoints need a "
                             "few KB)")
        if 8 + n > size:
            raise ValueError(f"{path}: truncated or corrupt safetensors file (header of {n} bytes, "
                             f"file of {size})")
        header_bytes = f.read(n)
    # one per tensor: counted without parsing anything
    entries = header_bytes.count(b'"data_offsets"')
    if entries > MAX_TENSORS:
        raise ValueError(f"{path}: the header lists {entries:,} tensors, more than MAX_TENSORS "
                         f"({MAX_TENSORS:,})")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: malformed safetensors header ({type(e).__name__})") from e
    if not isinstance(header, dict):
        raise ValueError(f"{path}: malformed safetensors header (not a JSON object)")
    # the same bound, for a header spelling its keys with escapes
    if len(header) > MAX_TENSORS + 1:
        raise ValueError(f"{path}: the header lists {len(header) - 1:,} tensors, more than "
                         f"MAX_TENSORS ({MAX_TENSORS:,})")
    data_size = size - 8 - n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            ok = (isinstance(dtype, str) and isinstance(shape, list)
                  and all(type(d) is int and d >= 0 for d in shape)
                  and type(begin) is int and type(end) is int)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"{path}: malformed safetensors header entry for {name!r}")
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}; only "
                             f"{', '.join(FLOAT_DTYPES)} weights are supported (quantized "
                             "checkpoints are not)")
        if not 0 <= begin <= end <= data_size:
            raise ValueError(f"{path}: truncated safetensors file (tensor {name} ends at byte "
                             f"{end} of the data, the file holds {data_size})")
        if end - begin != math.prod(shape) * FLOAT_DTYPES[dtype]:
            raise ValueError(f"{path}: tensor {name}'s byte range does not match its shape "
                             f"{tuple(shape)} {dtype}")
        tensors[name] = TensorInfo(path, dtype, tuple(shape))
    return tensors


def checkpoint_tensors(directory: Path) -> dict[str, TensorInfo]:
    """Every tensor of the checkpoint in `directory`: model.safetensors, or its index's shards.

    Raises: FileNotFoundError (no weights, a shard missing) or ValueError (bad index, a shard
    outside, a tensor in no shard or two, a header problem of read_safetensors_header).
    """
    if (directory / WEIGHTS_NAME).is_file():
        return read_safetensors_header(inside(directory, WEIGHTS_NAME))
    index_path = directory / INDEX_NAME
    if not index_path.is_file():
        raise FileNotFoundError(f"{directory}: no {WEIGHTS_NAME} (or {INDEX_NAME}) "
                                "in this directory")
    weight_map = read_json(inside(directory, INDEX_NAME)).get("weight_map")
    # counted before anything is looked at
    if isinstance(weight_map, dict) and len(weight_map) > MAX_TENSORS:
        raise ValueError(f"{index_path}: the index lists {len(weight_map):,} tensors, more than "
                         f"MAX_TENSORS ({MAX_TENSORS:,})")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str)
                                                   for v in weight_map.values()):
        raise ValueError(f"{index_path}: malformed index (weight_map must map tensor names to "
                         "file names)")
    names = set(weight_map.values())
    if len(names) > MAX_SHARDS:  # before resolving a single path
        raise ValueError(f"{index_path}: the index names {len(names):,} shard files, more than "
                         f"MAX_SHARDS ({MAX_SHARDS:,})")
    shards = {shard: inside(directory, shard) for shard in sorted(names)}
    tensors: dict[str, TensorInfo] = {}
    for shard, shard_path in shards.items():
        if not shard_path.is_file():
            raise FileNotFoundError(f"{directory}: shard {shard} named in {INDEX_NAME} "
                                    "is missing")
        for name, info in read_safetensors_header(shard_path).items():
            if name in tensors:
                raise ValueError(f"{directory}: tensor {name} is in both "
                                 f"{tensors[name].file.name} and {shard}")
            tensors[name] = info
        if len(tensors) > MAX_TENSORS:
            raise ValueError(f"{directory}: the shards hold more than MAX_TENSORS "
                             f"({MAX_TENSORS:,}) tensors")
    listed_elsewhere = sorted(n for n, shard in weight_map.items()
                              if n not in tensors or tensors[n].file != shards[shard])
    if listed_elsewhere:
        raise ValueError(f"{index_path}: tensor(s) not in the shard the index names: "
                         f"{', '.join(listed_elsewhere[:8])}")
    return tensors
