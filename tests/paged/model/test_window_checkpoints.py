"""Sliding-window checkpoints: the shipped weights in a MistralForCausalLM directory (no tokenizer file, bytes as
the shipped model reads them) give transformers 5.19's greedy tokens through the paged engine, for W smaller and
larger than the prompt and several block sizes; Qwen2's use_sliding_window too; what one window cannot describe is
refused by name."""

from __future__ import annotations

import json
import math

import pytest
import torch

from paged.config import CacheConfig, ModelConfig, SamplingParams
from paged.engine import LLMEngine
from paged.engine.windowing import held_blocks
from paged.model import load_model, save_model
from paged.model.io import DEFAULT_DIR

from helpers import mistral_window_dir

pytestmark = pytest.mark.model

transformers = pytest.importorskip("transformers")
PROMPT = "blocks of KV"  # 13 byte tokens with BOS; + SEP below: the recall model copies it back


def hf_greedy(path, ids: list[int], max_tokens: int) -> list[int]:
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    assert type(hf).__name__ in ("MistralForCausalLM", "Qwen2ForCausalLM")
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False, eos_token_id=None,
                          pad_token_id=0)
    return out[0, len(ids):].tolist()


@pytest.mark.parametrize("window,block_sizes", [(5, (2, 16)), (9, (4,)), (64, (1, 16))])
def test_mistral_directory_matches_transformers(tmp_path, window, block_sizes):
    """Greedy tokens of the paged engine == MistralForCausalLM's with sliding_window = W (W = 5, 9 < the 14-token
    prompt < 64), per block size; a running sequence never holds more than ceil(W / bs) + 1 blocks between steps."""
    path = mistral_window_dir(tmp_path / "m", window)
    model, tokenizer = load_model(path)
    assert model.config.model_type == "mistral" and model.config.sliding_window == window
    ids = tokenizer.encode(PROMPT) + [tokenizer.sep_token_id]
    expected = hf_greedy(path, ids, 12)
    full = LLMEngine(*load_model()).generate([ids], SamplingParams(max_tokens=12, ignore_eos=True))[0].token_ids
    assert (expected != full) == (window < len(ids))  # a short window changes what the recall model writes
    for block_size in block_sizes:
        engine = LLMEngine(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=64))
        rid = engine.add_request(ids, SamplingParams(max_tokens=12, ignore_eos=True))
        held = []
        while engine.has_unfinished():
            held += held_blocks(engine.step()).values()
        assert engine.output(rid).token_ids == expected, block_size
        assert max(held) <= math.ceil(window / block_size) + 1


def test_no_cache_forward_matches_transformers_logits(tmp_path):
    """TinyLlama's own forward (no cache, [B, T] rows) applies the window too: logits within 1e-5 (relative) of
    MistralForCausalLM's on a 40-token input with W = 7, and far from full attention's."""
    path = mistral_window_dir(tmp_path / "m", 7)
    model, _ = load_model(path)
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    ids = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, theirs = model(ids), hf(input_ids=ids).logits
        full = load_model()[0](ids)
    scale = theirs.abs().max()
    assert (ours - theirs).abs().max() <= 1e-5 * scale
    assert (full - theirs).abs().max() > 1e-2 * scale


def test_qwen2_use_sliding_window_matches_transformers(tmp_path):
    """A random Qwen2 checkpoint with use_sliding_window and max_window_layers 0 (every layer sliding, W = 4):
    the engine's greedy tokens equal Qwen2ForCausalLM's; save_model writes it back as transformers reads it."""
    from hf_tiny import build_checkpoint

    build_checkpoint(tmp_path / "q", "qwen2", use_sliding_window=True, sliding_window=4, max_window_layers=0)
    model, tokenizer = load_model(tmp_path / "q")
    assert model.config.sliding_window == 4
    ids = tokenizer.encode("A block table maps each logical block")
    expected = hf_greedy(tmp_path / "q", ids, 8)
    engine = LLMEngine(model, tokenizer, CacheConfig(block_size=2, num_blocks=64))
    assert engine.generate([ids], SamplingParams(max_tokens=8, ignore_eos=True))[0].token_ids == expected
    save_model(model, tmp_path / "again")
    assert load_model(tmp_path / "again")[0].config == model.config


REFUSED = [
    ("mistral", {"layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]},
     "per-layer mix"),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 2}, "per-layer mix"),
    ("llama", {"use_sliding_window": True}, "not supported for llama"),
    ("qwen3", {"layer_types": ["sliding_attention"] * 4, "use_sliding_window": True}, "not supported for qwen3"),
    ("mistral", {"sliding_window": 0}, "sliding_window must be an integer >= 1"),
    ("qwen2", {"use_sliding_window": "yes"}, "use_sliding_window must be true or false"),
]


@pytest.mark.parametrize("model_type,change,message", REFUSED, ids=[f"{t}-{m}" for t, _, m in REFUSED])
def test_what_one_window_cannot_describe_is_refused(model_type, change, message):
    """A per-layer mix, a window on an architecture without one, a bad value: ValueError naming it."""
    from paged.model.hf_config import config_from_hf_dict

    raw = json.loads((DEFAULT_DIR / "config.json").read_text())
    raw.update(model_type=model_type, **change)
    with pytest.raises(ValueError, match=message):
        config_from_hf_dict(raw, DEFAULT_DIR / "config.json")


def test_transformers_defaults_for_mistral_and_qwen2():
    """Absent fields read as transformers 5.19 reads them: Mistral's sliding_window 4096 (null: off), Qwen2's
    window only with use_sliding_window, a Qwen2 window no layer uses (max_window_layers >= layers) is off."""
    from paged.model.hf_config import config_from_hf_dict

    base = json.loads((DEFAULT_DIR / "config.json").read_text())
    read = lambda **kw: config_from_hf_dict({**base, **kw}, DEFAULT_DIR).sliding_window  # noqa: E731
    assert read(model_type="mistral") == 4096 and read(model_type="mistral", sliding_window=None) is None
    assert read(model_type="qwen2", sliding_window=8) is None
    assert read(model_type="qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=4) is None
    assert read(model_type="qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=0) == 8
    with pytest.raises(ValueError, match="attention_bias must be false for mistral"):
        ModelConfig(model_type="mistral", attention_bias=True)  # MistralForCausalLM has no bias to load
    with pytest.raises(ValueError, match="LlamaForCausalLM has no sliding window"):
        from paged.model.hf_config import config_to_hf_dict
        config_to_hf_dict(ModelConfig(sliding_window=8))
