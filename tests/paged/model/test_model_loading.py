"""load_model refuses a directory it cannot run before building or reading anything big, with a ValueError that
names the file: configs bigger than their weights, paths out of the directory, truncated or malformed files."""

import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

import paged.model.io as model_io
from paged.config import ModelConfig
from paged.model import TinyLlama, allowed_model_dirs, load_model, save_model

pytestmark = pytest.mark.model

TINY = ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
# Llama-3.2-1B's and Llama-3-70B's shapes: config.json files that claim far more than the tiny weights next to them.
BIG = {"1B": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8),
       "70B": dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                   num_attention_heads=64, num_key_value_heads=8)}
NESTED = "[" * 100_000 + "]" * 100_000  # valid JSON that Python's parser cannot descend (RecursionError)


@pytest.fixture
def model_dir(tmp_path):
    torch.manual_seed(0)
    return save_model(TinyLlama(TINY), tmp_path / "model")


@pytest.fixture
def no_real_build(monkeypatch):
    """Constructing a model anywhere but on "meta" (which allocates nothing) fails the test."""
    class Guarded(TinyLlama):
        def __init__(self, config, device=None):
            assert device == "meta", "load_model built a real model before refusing"
            super().__init__(config, device)
    monkeypatch.setattr(model_io, "TinyLlama", Guarded)


def edit_json(path, **changes):
    raw = json.loads(path.read_text())
    raw.update(changes)
    path.write_text(json.dumps(raw))


def refuse(path, message, error=ValueError):
    """load_model(path) raises `error` matching `message`, naming the model directory."""
    with pytest.raises(error, match=message) as info:
        load_model(path)
    assert str(path) in str(info.value)
    return info.value


@pytest.mark.parametrize("size", BIG)
def test_config_bigger_than_its_weights_is_refused_without_building(model_dir, no_real_build, size):
    """A 1B / 70B config.json next to the tiny weights: refused from the headers alone, no model built."""
    edit_json(model_dir / "config.json", **BIG[size])
    refuse(model_dir, r"num_hidden_layers \d+, the weights hold 2 layer")


def test_wider_config_with_the_same_layers_is_refused_by_shape(model_dir, no_real_build):
    """Same layer count, larger hidden size: the header's shapes give it away."""
    edit_json(model_dir / "config.json", hidden_size=64, head_dim=16)
    refuse(model_dir, r"has shape \(61, 32\), config.json implies \(61, 64\)")


def test_weights_larger_than_free_memory_are_refused(model_dir, monkeypatch, no_real_build):
    """A checkpoint that matches its config but cannot fit in the memory left is refused, with the numbers."""
    monkeypatch.setattr(model_io, "available_memory_bytes", lambda: 1000)
    refuse(model_dir, r"loading needs .* GiB \([\d,]+ parameters as float32\) but only")


def test_available_memory_is_known_here():
    """On Linux the free-memory probe reads a positive number (else the check above would never fire)."""
    assert model_io.available_memory_bytes() is None or model_io.available_memory_bytes() > 0


def shard(path):
    """Split model.safetensors into a.safetensors + b.safetensors with an index; returns the weight map."""
    tensors = load_file(str(path / "model.safetensors"))
    (path / "model.safetensors").unlink()
    names = sorted(tensors)
    weight_map = {n: "a.safetensors" if i % 2 else "b.safetensors" for i, n in enumerate(names)}
    for file in ("a.safetensors", "b.safetensors"):
        save_file({n: tensors[n] for n in names if weight_map[n] == file}, str(path / file))
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return weight_map


def point_shard_at(path, target):
    """Move shard b outside to `target` and make the index name it by `target`'s given spelling."""
    weight_map = shard(path)
    os.replace(path / "b.safetensors", path.parent / "outside.safetensors")
    index = {n: (target if f == "b.safetensors" else f) for n, f in weight_map.items()}
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))


def test_sharded_checkpoint_still_loads(model_dir):
    """The positive control for the three path tests below: an honest index with two shards loads."""
    shard(model_dir)
    model, _ = load_model(model_dir)
    assert model.config == TINY


def test_shard_path_with_dotdot_is_refused(model_dir):
    point_shard_at(model_dir, "../outside.safetensors")
    refuse(model_dir, "outside the model directory")


def test_absolute_shard_path_is_refused(model_dir):
    point_shard_at(model_dir, str(model_dir.parent / "outside.safetensors"))
    refuse(model_dir, "outside the model directory")


def test_symlink_out_of_the_directory_is_refused(model_dir):
    point_shard_at(model_dir, "b.safetensors")
    (model_dir / "b.safetensors").symlink_to(model_dir.parent / "outside.safetensors")
    refuse(model_dir, "outside the model directory")


def test_symlinked_config_out_of_the_directory_is_refused(model_dir):
    os.replace(model_dir / "config.json", model_dir.parent / "config.json")
    (model_dir / "config.json").symlink_to(model_dir.parent / "config.json")
    refuse(model_dir, "outside the model directory")


def test_hub_cache_snapshot_with_blob_symlinks_loads(tmp_path, model_dir):
    """A Hugging Face cache snapshot (files are symlinks to ../../blobs/) is the one place links may leave."""
    repo = tmp_path / "models--someone--tiny"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        os.replace(model_dir / name, repo / "blobs" / f"blob-{name}")
        (snapshot / name).symlink_to(f"../../blobs/blob-{name}")
    model, _ = load_model(snapshot)
    assert model.config == TINY


@pytest.mark.parametrize("keep", [4, 100, -50])
def test_truncated_safetensors_is_a_value_error(model_dir, keep):
    """Cut in the length prefix, in the header, or in the tensor data: ValueError naming the file."""
    weights = model_dir / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:keep])
    error = refuse(model_dir, "truncated")
    assert "model.safetensors" in str(error)


def test_malformed_safetensors_header_is_a_value_error(model_dir):
    body = b"{not json"
    (model_dir / "model.safetensors").write_bytes(len(body).to_bytes(8, "little") + body)
    refuse(model_dir, "malformed safetensors header")


def test_overlapping_tensor_bytes_are_a_value_error(model_dir):
    """Two tensors claiming the same bytes (well-formed JSON, sizes that fit): the library's own refusal comes
    back as a ValueError naming the file."""
    weights = model_dir / "model.safetensors"
    raw = weights.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header["model.layers.0.input_layernorm.weight"]["data_offsets"] = header["model.norm.weight"]["data_offsets"]
    body = json.dumps(header).encode()
    weights.write_bytes(len(body).to_bytes(8, "little") + body + raw[8 + n:])
    refuse(model_dir, "model.safetensors: malformed safetensors file")


def test_quantized_tensor_is_refused(model_dir):
    tensors = load_file(str(model_dir / "model.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"].to(torch.int8)
    save_file(tensors, str(model_dir / "model.safetensors"))
    refuse(model_dir, "model.norm.weight has dtype I8; only F32, F16, BF16")


BAD_JSON = [
    ("config.json", NESTED, "config.json: malformed JSON"),
    ("config.json", "[1, 2]", "config.json: expected a JSON object"),
    ("model.safetensors.index.json", "{oops", "index.json: malformed JSON"),
    ("model.safetensors.index.json", NESTED, "index.json: malformed JSON"),
    ("model.safetensors.index.json", '{"weight_map": ["a.safetensors"]}', "index.json: malformed index"),
    ("model.safetensors.index.json", '{"weight_map": {"x": 3}}', "index.json: malformed index"),
    ("tokenizer.json", "{oops", "tokenizer.json: not a tokenizer"),
    ("tokenizer.json", NESTED, "tokenizer.json: not a tokenizer"),
    ("tokenizer_config.json", NESTED, "tokenizer_config.json: malformed JSON"),
    ("generation_config.json", "{oops", "generation_config.json: malformed JSON"),
]


@pytest.mark.parametrize("name,text,message", BAD_JSON, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD_JSON)])
def test_malformed_json_files_are_value_errors(model_dir, name, text, message):
    """Broken, non-object or too deeply nested JSON in any file load_model reads: a ValueError naming it."""
    if name == "model.safetensors.index.json":
        shard(model_dir)
    if name in ("tokenizer_config.json", "generation_config.json"):
        tokenizers = pytest.importorskip("tokenizers")
        tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "hi": 5}, unk_token="[UNK]"))
        tok.save(str(model_dir / "tokenizer.json"))
    (model_dir / name).write_text(text)
    refuse(model_dir, message)


@pytest.mark.parametrize("field,value", [("rms_norm_eps", "tiny"), ("eos_token_id", "</s>"), ("hidden_size", True),
                                         ("tie_word_embeddings", "yes"), ("head_dim", 7)])
def test_wrongly_typed_config_values_are_value_errors(model_dir, field, value):
    """A config value of the wrong type fails at load with the field's name, not later inside a forward pass."""
    edit_json(model_dir / "config.json", **{field: value})
    refuse(model_dir, field)


def test_tokenizer_larger_than_the_embedding_is_refused(model_dir):
    """Token ids beyond vocab_size would index past the embedding table: refused at load."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {f"w{i}": i for i in range(TINY.vocab_size + 5)}
    tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0")).save(str(model_dir / "tokenizer.json"))
    refuse(model_dir, "66 tokens but the model's vocab_size is 61")


def test_allowed_model_dirs_keeps_only_model_directories(tmp_path, model_dir):
    """PAGED_MODEL_DIRS: resolved, deduplicated directories with a config.json, in order; nothing else."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "link").symlink_to(model_dir)
    entries = [str(model_dir), "", str(tmp_path / "empty"), str(tmp_path / "file.txt"), str(tmp_path / "nope"),
               str(tmp_path / "link"), str(model_dir / ".." / "model")]
    assert allowed_model_dirs({"PAGED_MODEL_DIRS": os.pathsep.join(entries)}) == [model_dir.resolve()]
    assert allowed_model_dirs({}) == [] and allowed_model_dirs({"PAGED_MODEL_DIRS": ""}) == []
