"""Tiny random Hugging Face checkpoints built offline in a test: transformers' own Llama / Qwen2 / Qwen3 classes
with a byte-level BPE tokenizer trained by `tokenizers` on a few sentences, saved with save_pretrained."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

TEXT = ["PagedAttention stores the KV cache in fixed-size blocks scattered through one pool.",
        "A block table maps each logical block of a sequence to a physical block.",
        "The quick brown fox jumps over the lazy dog, then reads its keys and values back.",
        "Prefix caching lets requests with the same prompt share full blocks; copy on write keeps them apart."]
SPECIALS = ["<s>", "</s>", "<|endoftext|>"]  # ids 0, 1, 2
VOCAB = 320  # the model's embedding rows; the tokenizer uses 300 of them


def train_tokenizer(add_bos: bool):
    """Byte-level BPE (GPT-2 / Llama 3 / Qwen style); add_bos attaches a post-processor that prepends <s> (as Llama
    3's tokenizer.json does), otherwise encoding adds nothing (as Qwen's)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT * 4, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return tok


def hf_config(arch: str, **overrides):
    """A transformers config of `arch` ("llama", "qwen2", "qwen3"): 2 layers, hidden 64, 4 heads / 2 kv heads (GQA).
    Qwen3 gets an explicit head_dim 32 (not 64 / 4) so that path is exercised."""
    transformers = pytest.importorskip("transformers")
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6)
    if arch == "llama":
        cfg = transformers.LlamaConfig(**common, bos_token_id=0, eos_token_id=1, **overrides)
    elif arch == "qwen2":
        cfg = transformers.Qwen2Config(**common, bos_token_id=None, eos_token_id=2, **overrides)
    else:
        cfg = transformers.Qwen3Config(**common, head_dim=32, bos_token_id=None, eos_token_id=2, **overrides)
    cfg._attn_implementation = "eager"
    return cfg


@torch.no_grad()
def build_checkpoint(path: Path, arch: str, seed: int = 0, dtype: torch.dtype = torch.float32,
                     max_shard_size: str | None = None, **overrides):
    """Save a random `arch` model (weights large enough that every part moves the logits) and its tokenizer to
    `path`; returns the transformers model in fp32 holding exactly the saved weights (bf16-rounded if dtype is)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(arch, **overrides)).eval()
    for name, p in model.named_parameters():
        p.copy_(torch.rand_like(p) + 0.5 if name.endswith("norm.weight") else torch.randn_like(p) * 0.3)
    model.to(dtype).save_pretrained(path, **({"max_shard_size": max_shard_size} if max_shard_size else {}))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(add_bos=arch == "llama"),
                                                bos_token="<s>" if arch == "llama" else None,
                                                eos_token="</s>" if arch == "llama" else "<|endoftext|>")
    fast.save_pretrained(path)
    if dtype == torch.float32:
        return model
    # transformers reading the saved files in fp32 (casting `model` back would also round its RoPE table).
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                             attn_implementation="eager").eval()
