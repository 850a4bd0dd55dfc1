"""Local Hugging Face checkpoints of LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM, built offline by
transformers itself: same tokens, same logits, same greedy text as transformers, and the paged engine equals its
contiguous twin on them (prefix caching, preemption), for fp32 / bf16, single-file / sharded, tied / untied."""

import json

import pytest
import torch

from paged.config import CacheConfig, ModelConfig, SamplingParams
from paged.engine import LLMEngine
from paged.engine.twins import run_twins
from paged.model import TinyLlama, load_model, save_model
from paged.model.llama import llama3_inv_freq

from helpers import assert_close_scaled, assert_far_scaled, max_abs_diff, scaled_atol
from hf_tiny import TEXT, build_checkpoint

pytestmark = pytest.mark.model

transformers = pytest.importorskip("transformers")

ARCHS = ["llama", "qwen2", "qwen3"]
PROMPTS = ["PagedAttention stores the KV", "A block table maps", "The quick brown fox jumps over the lazy dog"]


def logits_of(model, ids, positions=None):
    with torch.no_grad():
        return model(ids, positions)


@pytest.mark.parametrize("arch", ARCHS)
def test_tokens_logits_and_greedy_text_match_transformers(tmp_path, arch):
    """Our tokenizer gives transformers' ids (BOS for Llama, none for Qwen); our model its logits, at shifted
    positions too; the paged engine's greedy continuation equals transformers' generate token for token."""
    theirs = build_checkpoint(tmp_path, arch)
    ours, tokenizer = load_model(tmp_path)
    assert ours.config.model_type == arch and ours.config.head_dim == (32 if arch == "qwen3" else 16)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    for text in PROMPTS:
        assert tokenizer.encode(text) == hf_tokenizer(text).input_ids
    assert (tokenizer.encode("x")[0] == 0) == (arch == "llama")
    ids = torch.tensor([tokenizer.encode(p)[:6] for p in PROMPTS])
    positions = torch.arange(6).expand(3, 6) + torch.tensor([[0], [7], [40]])
    expected = theirs(input_ids=ids, position_ids=positions).logits.detach()
    assert expected.std() > 0.5
    assert_close_scaled(logits_of(ours, ids, positions), expected, rel=1e-5)

    engine = LLMEngine(ours, tokenizer, CacheConfig(block_size=4, num_blocks=64, seed=0), attn_impl="gather")
    for prompt in PROMPTS:
        got = engine.generate([prompt], SamplingParams(max_tokens=12))[0].token_ids
        prompt_ids = torch.tensor([tokenizer.encode(prompt)])
        want = theirs.generate(prompt_ids, max_new_tokens=12, do_sample=False)[0, prompt_ids.shape[1]:].tolist()
        assert got == want


@pytest.mark.parametrize("arch", ARCHS)
def test_paged_equals_contiguous_with_prefix_caching_and_preemption(tmp_path, arch):
    """On each architecture the paged engine equals its contiguous twin: roomy pool with prefix caching, then a
    pool small enough to force recompute preemptions; and prefix caching on gives the same tokens as off."""
    build_checkpoint(tmp_path, arch)
    model, tokenizer = load_model(tmp_path)
    prompts = [TEXT[0], TEXT[0][:40] + " differs", TEXT[1], TEXT[0]]
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    scale = max(logits_of(model, torch.tensor([tokenizer.encode(p)])).abs().max().item() for p in prompts)
    runs = {}
    for label, cache in [("cached", CacheConfig(block_size=4, num_blocks=128, seed=1, enable_prefix_caching=True)),
                         ("plain", CacheConfig(block_size=4, num_blocks=128, seed=1)),
                         ("tight", CacheConfig(block_size=4, num_blocks=24, seed=2, watermark=0.0))]:
        run = runs[label] = run_twins(model, tokenizer, prompts, params, cache, attn_impl="gather")
        assert run.identical and run.max_diff < scaled_atol(scale, 1e-5), label
    assert sum(len(s.paged.preempted) for s in runs["tight"].steps) > 0, "the small pool was meant to preempt"
    assert [o.token_ids for o in runs["cached"].paged] == [o.token_ids for o in runs["plain"].paged]
    assert [o.token_ids for o in runs["tight"].paged] == [o.token_ids for o in runs["plain"].paged]


@pytest.mark.parametrize("arch", ARCHS)
def test_bf16_sharded_tied_checkpoint(tmp_path, arch):
    """bf16 weights in several shards with an index, embeddings tied: loaded as fp32 they give the logits of
    transformers on the same (bf16-rounded) weights; computed in bf16, they stay as close to those fp32 logits as
    transformers' own bf16 forward does (bf16 keeps ~3 digits: both drift by up to ~10% of max |logits| here)."""
    theirs = build_checkpoint(tmp_path, arch, dtype=torch.bfloat16, max_shard_size="40KB", tie_word_embeddings=True)
    assert (tmp_path / "model.safetensors.index.json").is_file() and not (tmp_path / "model.safetensors").exists()
    weight_map = json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]
    assert len(set(weight_map.values())) > 1
    ours, tokenizer = load_model(tmp_path)
    assert ours.config.tie_word_embeddings and ours.lm_head.weight is ours.model.embed_tokens.weight
    assert ours.lm_head.weight.dtype == torch.float32
    ids = torch.tensor([tokenizer.encode(TEXT[2])])
    expected = theirs(input_ids=ids).logits.detach()
    assert_close_scaled(logits_of(ours, ids), expected, rel=1e-5)
    low, _ = load_model(tmp_path, dtype=torch.bfloat16)
    assert low.lm_head.weight.dtype == torch.bfloat16
    theirs_low = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16,
                                                                   attn_implementation="eager").eval()
    their_drift = max_abs_diff(theirs_low(input_ids=ids).logits.detach().float(), expected)
    assert max_abs_diff(logits_of(low, ids).float(), expected) <= 2 * their_drift + scaled_atol(expected, 1e-2)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_attention_bias_option_matches_transformers(tmp_path, arch):
    """Llama's and Qwen3's attention_bias puts a bias on q, k, v and o (Qwen2's is q/k/v only): same logits."""
    theirs = build_checkpoint(tmp_path, arch, attention_bias=True)
    ours, _ = load_model(tmp_path)
    assert ours.config.qkv_bias and ours.config.o_proj_bias
    ids = torch.randint(0, 300, (2, 10))
    assert_close_scaled(logits_of(ours, ids), theirs(input_ids=ids).logits.detach(), rel=1e-5)


def test_llama3_rope_scaling_matches_transformers(tmp_path):
    """Llama 3.1's "llama3" RoPE (a small original context so every band is in play at these positions) gives
    transformers' logits; the same weights with default RoPE would not."""
    rope = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 4.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    theirs = build_checkpoint(tmp_path, "llama", rope_parameters=rope)
    ours, _ = load_model(tmp_path)
    assert ours.config.rope_type == "llama3" and ours.config.rope_original_max_position_embeddings == 32
    ids = torch.randint(0, 300, (1, 24))
    positions = torch.arange(24)[None] + 60
    expected = theirs(input_ids=ids, position_ids=positions).logits.detach()
    assert_close_scaled(logits_of(ours, ids, positions), expected, rel=1e-5)
    plain = TinyLlama(ModelConfig(**{**ours.config.to_dict(), "rope_type": "default"})).eval()
    plain.load_state_dict(ours.state_dict())
    assert_far_scaled(logits_of(plain, ids, positions), expected, rel=1e-3)


def test_llama3_frequency_bands():
    """Long wavelengths are divided by the factor, short ones kept, the middle band blends between the two."""
    cfg = ModelConfig(rope_type="llama3", rope_factor=8.0, rope_original_max_position_embeddings=64)
    inv_freq = torch.tensor([1.0, 0.2, 0.05, 0.01])  # turns over 64 positions: 10.2, 2.04, 0.51, 0.10
    scaled = llama3_inv_freq(inv_freq, cfg)
    assert scaled[0] == inv_freq[0] and torch.allclose(scaled[2:], inv_freq[2:] / 8)
    assert inv_freq[1] / 8 < scaled[1] < inv_freq[1]


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_loads_what_we_save(tmp_path, arch):
    """save_model writes a directory transformers' AutoModelForCausalLM reads as the same architecture, with the
    same logits (so ModelConfig round-trips for all three)."""
    build_checkpoint(tmp_path / "hf", arch, tie_word_embeddings=arch == "qwen2")
    ours, _ = load_model(tmp_path / "hf")
    save_model(ours, tmp_path / "ours")
    again, _ = load_model(tmp_path / "ours")
    assert again.config == ours.config
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours", attn_implementation="eager")
    assert type(theirs).__name__ == {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                     "qwen3": "Qwen3ForCausalLM"}[arch]
    ids = torch.randint(0, 300, (2, 12))
    assert_close_scaled(logits_of(ours, ids), theirs(input_ids=ids).logits.detach(), rel=1e-5)


UNSUPPORTED = [
    ("qwen2", {"use_sliding_window": True, "sliding_window": 8, "layer_types": ["full_attention",
                                                                             "sliding_attention"]}, "per-layer mix"),
    ("qwen3", {"layer_types": ["full_attention", "sliding_attention"], "use_sliding_window": True}, "sliding-window"),
    ("llama", {"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}}, "RoPE type 'yarn'"),
    ("llama", {"hidden_act": "gelu"}, "hidden_act must be 'silu'"),
    ("llama", {"mlp_bias": True}, "mlp_bias is not supported"),
]


@pytest.mark.parametrize("arch,change,message", UNSUPPORTED, ids=[m for _, _, m in UNSUPPORTED])
def test_unsupported_features_are_refused_by_name(tmp_path, arch, change, message):
    """What this decoder cannot run exactly is refused with a message naming it, never silently approximated."""
    build_checkpoint(tmp_path, arch)
    raw = json.loads((tmp_path / "config.json").read_text())
    raw.update(change)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=message):
        load_model(tmp_path)


def test_special_ids_and_bos_follow_the_directory(tmp_path):
    """eos comes from generation_config.json first (the first of a list), bos is prepended only when
    tokenizer_config.json's add_bos_token asks for it."""
    build_checkpoint(tmp_path, "qwen2")
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2], "bos_token_id": 0}))
    raw = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**raw, "add_bos_token": True}))
    _, tokenizer = load_model(tmp_path)
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 1)
    assert tokenizer.encode("A block")[0] == 0 and tokenizer.encode("A block", add_bos=False)[0] != 0
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**raw, "add_bos_token": False}))
    _, tokenizer = load_model(tmp_path)
    assert tokenizer.encode("A block")[0] != 0


def test_generation_stops_on_any_of_several_eos_ids(tmp_path):
    """generation_config.json's eos_token_id as a list [</s>, t]: the engine stops at the first of either, exactly
    where transformers' generate (given the same list) stops, with finish reason "eos"."""
    theirs = build_checkpoint(tmp_path, "llama")
    _, tokenizer = load_model(tmp_path)
    prompt_ids = torch.tensor([tokenizer.encode(PROMPTS[0])])
    mask = dict(attention_mask=torch.ones_like(prompt_ids), pad_token_id=2)  # BOS (id 0) is not padding
    free_run = theirs.generate(prompt_ids, max_new_tokens=12, do_sample=False, eos_token_id=None,
                               **mask)[0, prompt_ids.shape[1]:].tolist()
    second_eos = free_run[3]  # a token the model writes on its own: the list's second eos ends the run there
    assert 1 not in free_run[:4]
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, second_eos]}))
    model, tokenizer = load_model(tmp_path)
    assert tokenizer.eos_token_ids == (1, second_eos)
    want = theirs.generate(prompt_ids, max_new_tokens=12, do_sample=False, eos_token_id=[1, second_eos],
                           **mask)[0, prompt_ids.shape[1]:].tolist()
    engine = LLMEngine(model, tokenizer, CacheConfig(block_size=4, num_blocks=64, seed=0), attn_impl="gather")
    out = engine.generate([PROMPTS[0]], SamplingParams(max_tokens=12))[0]
    assert out.finish_reason == "eos" and out.token_ids == want == free_run[:free_run.index(second_eos) + 1]


def test_a_kv_pool_that_cannot_fit_is_refused_before_allocation(tmp_path, monkeypatch):
    """LLMEngine refuses a pool larger than the free memory with every factor of its size in the message, before
    allocating it; a pool that fits is built."""
    from paged.engine import admission

    build_checkpoint(tmp_path, "qwen3")  # head_dim 32 (not hidden / heads): the size must use the config's
    model, tokenizer = load_model(tmp_path)
    need = 2 * 2 * 100 * 8 * 2 * 32 * 4  # K and V x layers x num_blocks x block_size x kv heads x head_dim x fp32
    allocations = []
    monkeypatch.setattr(admission, "free_memory_bytes", lambda device: need - 1)
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: allocations.append(a) or pytest.fail("allocated"))
    with pytest.raises(ValueError) as err:
        LLMEngine(model, tokenizer, CacheConfig(block_size=8, num_blocks=100))
    for number in (f"{need:,} bytes", "2 layers", "100 blocks", "block_size 8", "2 kv heads", "head_dim 32",
                   "4 bytes (float32)", f"{need - 1:,} bytes"):
        assert number in str(err.value)
    assert allocations == []
    monkeypatch.undo()
    monkeypatch.setattr(admission, "free_memory_bytes", lambda device: need)
    assert LLMEngine(model, tokenizer, CacheConfig(block_size=8, num_blocks=100)).num_blocks == 100


def test_free_memory_is_the_gpus_on_cuda_and_the_hosts_on_cpu(monkeypatch):
    """The pool check reads torch.cuda.mem_get_info's free bytes for a CUDA model (checked here without a GPU),
    the host's available memory otherwise."""
    from paged.engine import admission

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (123_456, 999_999))
    assert admission.free_memory_bytes(torch.device("cuda")) == 123_456
    host = admission.free_memory_bytes(torch.device("cpu"))
    assert host is None or host > 0
    config = ModelConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2)
    need = 2 * 2 * 10 * 4 * 2 * 16 * 4  # K and V x layers x blocks x block_size x kv heads x head_dim x fp32
    assert admission.check_pool_memory(config, 10, 4, torch.float32, torch.device("cuda")) == need
    with pytest.raises(ValueError, match="123,456 bytes"):
        admission.check_pool_memory(config, 10_000, 4, torch.float32, torch.device("cuda"))
