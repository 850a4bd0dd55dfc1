"""TinyLlama: backend path vs no-cache path, parity with transformers, GQA head mapping, save/load, errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from paged.config import ModelConfig
from paged.model import ByteTokenizer, TinyLlama, load_model, save_model
from paged.model.data import recall_accuracy
from paged.model.io import DEFAULT_DIR

from helpers import assert_close_scaled, assert_far_scaled

pytestmark = pytest.mark.model

TINY = ModelConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, rope_theta=500.0)


def random_model(config: ModelConfig = TINY, seed: int = 0) -> TinyLlama:
    """A model whose weights are large enough that every component visibly moves the logits."""
    torch.manual_seed(seed)
    model = TinyLlama(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.3)
    return model


class LoopBackend:
    """Test backend for ONE sequence: appends k/v to a per-layer list, then attends with explicit loops.

    kv_head_of(h) picks which kv head query head h reads, so tests can try the right and a wrong mapping.
    """

    def __init__(self, kv_head_of):
        self.kv_head_of = kv_head_of
        self.keys, self.values = {}, {}

    def __call__(self, layer, q, k, v):
        self.keys[layer] = torch.cat([self.keys.get(layer, k[:0]), k])  # [ctx, K, D]
        self.values[layer] = torch.cat([self.values.get(layer, v[:0]), v])
        ctx, n = self.keys[layer].shape[0], q.shape[0]
        out = torch.empty_like(q)  # [N, H, D]
        for i in range(n):
            visible = ctx - n + i + 1  # causal: the i-th new token sees everything before it and itself
            for h in range(q.shape[1]):
                kh = self.kv_head_of(h)
                keys, values = self.keys[layer][:visible, kh], self.values[layer][:visible, kh]  # [visible, D]
                weights = torch.softmax(keys @ q[i, h] / q.shape[-1] ** 0.5, dim=0)  # [visible]
                out[i, h] = weights @ values
        return out


def grouped(h):
    return h // (TINY.num_attention_heads // TINY.num_key_value_heads)


@torch.no_grad()
def test_backend_path_matches_no_cache_path():
    """Prefill 5 tokens then decode one at a time through a backend: same logits as one causal forward."""
    model = random_model()
    ids = torch.randint(0, TINY.vocab_size, (12,))
    reference = model(ids[None])[0]  # [T, V]
    backend = LoopBackend(grouped)
    chunks = [model(ids[:5], torch.arange(5), backend=backend)]
    for t in range(5, 12):
        chunks.append(model(ids[t:t + 1], torch.tensor([t]), backend=backend))
    assert reference.std() > 0.5  # the comparison is not between two near-zero tensors
    assert_close_scaled(torch.cat(chunks), reference, rel=1e-5)


@torch.no_grad()
def test_gqa_query_head_reads_kv_head_h_div_group():
    """Query head h reads kv head h // (num_heads // num_kv_heads); the interleaved h % num_kv_heads differs."""
    model = random_model()
    ids = torch.randint(0, TINY.vocab_size, (9,))
    reference = model(ids[None])[0]
    right = model(ids, torch.arange(9), backend=LoopBackend(grouped))
    wrong = model(ids, torch.arange(9), backend=LoopBackend(lambda h: h % TINY.num_key_value_heads))
    assert_close_scaled(right, reference, rel=1e-5)
    assert_far_scaled(wrong, reference, rel=1e-2)


@torch.no_grad()
def test_positions_drive_rope():
    """positions=None means arange(T); RoPE is relative (a constant shift changes nothing) but distances matter."""
    model = random_model()
    ids = torch.randint(0, TINY.vocab_size, (2, 7))
    assert torch.equal(model(ids), model(ids, torch.arange(7)))
    assert_close_scaled(model(ids, torch.arange(7) + 30), model(ids), rel=1e-5)
    assert_far_scaled(model(ids, torch.arange(7) * 2), model(ids), rel=1e-2)


def test_bad_inputs_and_bad_backend_raise():
    """Wrong input ranks and a backend returning the wrong shape raise ValueError naming the problem."""
    model = random_model()
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[N\]"):
        model(torch.zeros(1, 5, dtype=torch.long), backend=LoopBackend(grouped))
    with pytest.raises(ValueError, match="backend returned shape"):
        model(torch.zeros(3, dtype=torch.long), torch.arange(3), backend=lambda i, q, k, v: k)


def hf_config(config: ModelConfig):
    transformers = pytest.importorskip("transformers")
    return transformers.LlamaConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads, rms_norm_eps=config.rms_norm_eps,
        max_position_embeddings=config.max_position_embeddings, tie_word_embeddings=config.tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta}, attn_implementation="eager")


@pytest.mark.parametrize("tied", [False, True])
@torch.no_grad()
def test_parity_with_transformers_llama(tied):
    """transformers' LlamaForCausalLM with random weights, loaded into ours by name: same logits (rel 1e-5)."""
    transformers = pytest.importorskip("transformers")
    config = ModelConfig(**{**TINY.to_dict(), "tie_word_embeddings": tied})
    torch.manual_seed(1)
    theirs = transformers.LlamaForCausalLM(hf_config(config)).eval()
    for name, p in theirs.named_parameters():
        p.copy_(torch.rand_like(p) + 0.5 if name.endswith("norm.weight") else torch.randn_like(p) * 0.3)
    ours = TinyLlama(config).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)  # identical parameter names and shapes
    ids = torch.randint(0, config.vocab_size, (2, 16))
    positions = torch.arange(16).expand(2, 16) + torch.tensor([[0], [5]])  # RoPE at offset positions too
    expected = theirs(input_ids=ids, position_ids=positions).logits
    assert expected.std() > 0.5
    assert_close_scaled(ours(ids, positions), expected, rel=1e-5)


@torch.no_grad()
def test_transformers_loads_what_we_save(tmp_path):
    """A directory written by save_model loads in transformers' from_pretrained and gives the same logits."""
    transformers = pytest.importorskip("transformers")
    ours = random_model()
    save_model(ours, tmp_path)
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids = torch.randint(0, TINY.vocab_size, (1, 20))
    assert_close_scaled(ours(ids), theirs(input_ids=ids).logits, rel=1e-5)


@torch.no_grad()
def test_transformers_agrees_on_the_shipped_model():
    """The shipped weights give the same logits in transformers as in TinyLlama (a real checkpoint, not random)."""
    transformers = pytest.importorskip("transformers")
    ours, tokenizer = load_model()
    theirs = transformers.LlamaForCausalLM.from_pretrained(DEFAULT_DIR, attn_implementation="eager").eval()
    ids = torch.tensor([tokenizer.encode("PagedAttention, 分页 1 2 3")])
    assert_close_scaled(ours(ids), theirs(input_ids=ids).logits, rel=1e-5)


@pytest.mark.parametrize("tied", [False, True])
@torch.no_grad()
def test_save_load_round_trip(tmp_path, tied):
    """save_model then load_model: same config, identical tensors, identical logits, eval mode, byte tokenizer."""
    model = random_model(ModelConfig(**{**TINY.to_dict(), "tie_word_embeddings": tied}))
    save_model(model, tmp_path / "m")
    loaded, tokenizer = load_model(tmp_path / "m")
    assert loaded.config == model.config and not loaded.training
    assert isinstance(tokenizer, ByteTokenizer)
    ours, theirs = model.state_dict(), loaded.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert (loaded.lm_head.weight is loaded.model.embed_tokens.weight) == tied
    ids = torch.randint(0, TINY.vocab_size, (2, 10))
    assert torch.equal(model(ids), loaded(ids))
    raw = json.loads((tmp_path / "m" / "config.json").read_text())
    assert raw["model_type"] == "llama" and raw["architectures"] == ["LlamaForCausalLM"]


def test_load_sharded_checkpoint_and_dtype(tmp_path):
    """A model.safetensors.index.json with two shards loads; dtype= casts the weights."""
    model = random_model()
    save_model(model, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    (tmp_path / "model.safetensors").unlink()
    names = sorted(tensors)
    half = len(names) // 2
    save_file({n: tensors[n] for n in names[:half]}, str(tmp_path / "a.safetensors"))
    save_file({n: tensors[n] for n in names[half:]}, str(tmp_path / "b.safetensors"))
    weight_map = {n: "a.safetensors" if i < half else "b.safetensors" for i, n in enumerate(names)}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    loaded, _ = load_model(tmp_path, dtype=torch.bfloat16)
    assert loaded.lm_head.weight.dtype == torch.bfloat16
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight.bfloat16())


def test_tokenizer_json_is_used_when_present(tmp_path):
    """A tokenizer.json next to the weights is wrapped (with the config's bos/eos ids) instead of bytes."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "hi": 5}, unk_token="[UNK]"))
    save_model(random_model(), tmp_path)
    tok.save(str(tmp_path / "tokenizer.json"))
    _, tokenizer = load_model(tmp_path)
    assert tokenizer.encode("hi") == [TINY.bos_token_id, 5]
    assert tokenizer.eos_token_id == TINY.eos_token_id


def _edit_config(path, **changes):
    raw = json.loads((path / "config.json").read_text())
    raw.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del raw[key]
    (path / "config.json").write_text(json.dumps(raw))


def _edit_tensors(path, edit):
    tensors = load_file(str(path / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(path / "model.safetensors"))


BAD_DIRS = [
    ("missing dir", lambda p: p.rename(p.with_name("gone")), FileNotFoundError, "does not exist"),
    ("no config", lambda p: (p / "config.json").unlink(), FileNotFoundError, "no config.json"),
    ("bad json", lambda p: (p / "config.json").write_text("{oops"), ValueError, "malformed JSON"),
    ("not supported", lambda p: _edit_config(p, model_type="gpt2"), ValueError,
     "model_type must be one of 'llama'.*got 'gpt2'"),
    ("no field", lambda p: _edit_config(p, hidden_size=None), ValueError, "missing required field.*hidden_size"),
    ("no weights", lambda p: (p / "model.safetensors").unlink(), FileNotFoundError, "no model.safetensors"),
    ("missing tensor", lambda p: _edit_tensors(p, lambda t: t.pop("model.norm.weight")), ValueError,
     "missing tensor.*model.norm.weight"),
    ("extra tensor", lambda p: _edit_tensors(p, lambda t: t.update(extra=torch.zeros(1))), ValueError,
     "unexpected tensor.*extra"),
    ("wrong shape", lambda p: _edit_tensors(p, lambda t: t.update({"lm_head.weight": torch.zeros(3, 3)})),
     ValueError, r"lm_head.weight has shape \(3, 3\), config.json implies \(61, 32\)"),
]


@pytest.mark.parametrize("label,damage,error,message", BAD_DIRS, ids=[b[0] for b in BAD_DIRS])
def test_bad_directories_give_clear_errors(tmp_path, label, damage, error, message):
    """Each kind of broken model directory raises the right error type with a message naming path and cause."""
    path = tmp_path / "model"
    save_model(random_model(), path)
    damage(path)
    with pytest.raises(error, match=message) as info:
        load_model(path)
    assert str(path) in str(info.value)


def test_unknown_config_fields_are_ignored(tmp_path):
    """Extra fields in config.json (as real checkpoints have) do not stop loading."""
    save_model(random_model(), tmp_path)
    _edit_config(tmp_path, use_cache=True, some_future_field={"x": 1})
    model, _ = load_model(tmp_path)
    assert model.config == TINY


def test_shipped_model_loads_fast():
    """The shipped default loads in under a second in a fresh process (after imports), in eval mode."""
    code = ("import time; from paged.model import load_model; from paged.config import ModelConfig; "
            "t = time.perf_counter(); m, tok = load_model(); dt = time.perf_counter() - t; "
            "assert m.config == ModelConfig() and not m.training and tok.eos_token_id == 257; print(dt)")
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 1.0


def test_shipped_model_recalls_fresh_text():
    """The shipped model reproduces >= 95% of the bytes of 64 fresh 40-120-char strings (unseen eval seed)."""
    torch.manual_seed(0)
    model, tokenizer = load_model()
    training_seed = json.loads((DEFAULT_DIR / "training_log.json").read_text())["seed"]
    assert recall_accuracy(model, tokenizer, n=64, seed=training_seed + 4242) >= 0.95
