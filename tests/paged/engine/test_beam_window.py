"""Beam search on a sliding-window checkpoint (issue 35): a Mistral directory whose config.json
sets sliding_window gives transformers' MistralForCausalLM beams and scores (paged, the contiguous
twin, under preemption, from the CLI), each beam freeing the blocks behind its window; full
attention would give other beams."""

from __future__ import annotations

import json
import math

import pytest
import torch

from helpers import mistral_window_dir
from paged.engine.beam import BeamSearch
from paged.engine.beam_group import BeamParams
from paged.config import CacheConfig, SchedulerConfig
from paged.engine.windowing import held_blocks
from paged.model import load_model
from paged.model.tokenizer import EOS, SEP

pytestmark = pytest.mark.engine

transformers = pytest.importorskip("transformers")
WINDOW, MAX_TOKENS = 5, 8
TEXTS = ("no", "hello world")  # 4 and 13 prompt tokens with SEP: shorter and longer than the window


@pytest.fixture(scope="module")
def window_dir(tmp_path_factory):
    return mistral_window_dir(tmp_path_factory.mktemp("beam") / "mistral", WINDOW)


@pytest.fixture(scope="module")
def hf_window(window_dir):
    hf = transformers.AutoModelForCausalLM.from_pretrained(window_dir, attn_implementation="eager")
    hf.eval()
    assert type(hf).__name__ == "MistralForCausalLM" and hf.config.sliding_window == WINDOW
    return hf


@torch.no_grad()
def hf_window_beams(hf, ids: list[int], k: int) -> tuple[list[list[int]], torch.Tensor]:
    """MistralForCausalLM's K finished beams (cut after EOS) and scores on the window checkpoint."""
    out = hf.generate(torch.tensor([ids]), num_beams=k, num_return_sequences=k, do_sample=False,
                      early_stopping=True, max_new_tokens=MAX_TOKENS, return_dict_in_generate=True,
                      output_scores=True, pad_token_id=EOS, eos_token_id=EOS)
    rows = [r[:r.index(EOS) + 1] if EOS in r else r for r in out.sequences[:, len(ids):].tolist()]
    return rows, out.sequences_scores


def assert_same(result, theirs, their_scores, where) -> None:
    assert [b.token_ids for b in result.beams] == theirs, where
    ours = torch.tensor([b.score for b in result.beams])
    atol = 1e-6 * their_scores.abs().max().item()
    assert torch.allclose(ours, their_scores, rtol=1e-4, atol=atol), where


@pytest.mark.slow
def test_window_beams_equal_mistral_transformers(window_dir, hf_window, shipped):
    """K = 4 beams and scores == MistralForCausalLM's (W = 5), paged (block sizes 2 and 4, chunked
    prefill) and contiguous; the paged beams free blocks behind their windows and never hold more
    than ceil(W / bs) + 1 blocks between steps; the full-attention beams differ (so the test fails
    if the window is ignored)."""
    model, tokenizer = load_model(window_dir)
    assert model.config.sliding_window == WINDOW
    differs = []
    for text in TEXTS:
        ids = tokenizer.encode(text) + [SEP]
        theirs, their_scores = hf_window_beams(hf_window, ids, 4)
        full = BeamSearch(*shipped, CacheConfig(block_size=4, num_blocks=64)).run(
            ids, BeamParams(beam_width=4, max_tokens=MAX_TOKENS))
        differs.append([b.token_ids for b in full.beams] != theirs)
        for block_size, layout in ((2, "paged"), (4, "paged"), (4, "contiguous")):
            search = BeamSearch(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=96),
                                SchedulerConfig(max_num_batched_tokens=8,
                                                enable_chunked_prefill=True), kv_layout=layout)
            result = search.run(ids, BeamParams(beam_width=4, max_tokens=MAX_TOKENS))
            assert_same(result, theirs, their_scores, (text, block_size, layout))
            if layout == "paged" and len(ids) > WINDOW:
                assert any(t.window_freed for t in result.traces)
                held = [n for t in result.traces for n in held_blocks(t).values()]
                assert max(held) <= math.ceil(WINDOW / block_size) + 1, (text, block_size, held)
            assert search.block_manager.num_free_blocks == 96
    assert any(differs)


@pytest.mark.slow
def test_window_beams_preempted_and_resumed(window_dir, hf_window):
    """Six prompts on a pool of 24 blocks: a group is preempted and resumed by recompute, and each
    prompt's beams still equal MistralForCausalLM's."""
    model, tokenizer = load_model(window_dir)
    texts = ("hello world", "abc 123", "PagedAttention", "blocks of KV", "no", "xy")
    prompts = [tokenizer.encode(t) + [SEP] for t in texts]
    search = BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=24, watermark=0.0))
    results = search.run_all(prompts, BeamParams(beam_width=4, max_tokens=MAX_TOKENS))
    assert sum(r.preemptions for r in results) > 0
    for ids, result in zip(prompts, results):
        assert_same(result, *hf_window_beams(hf_window, ids, 4), ids)
    assert search.block_manager.num_free_blocks == 24


def test_window_cli_beams_and_flag_agree(window_dir, capsys):
    """`generate --model DIR --beam-width 4 --json` on the window checkpoint and `--sliding-window
    5` on the shipped model print the same beams, and they differ from the full-attention beams."""
    from paged.__main__ import main

    common = ["generate", "hello world", "--json", "--beam-width", "4",
              "--max-tokens", str(MAX_TOKENS), "--block-size", "4", "--num-blocks", "64"]
    beams = []
    for extra in (["--model", str(window_dir)], ["--sliding-window", str(WINDOW)], []):
        assert main([*common, *extra]) == 0
        beams.append(json.loads(capsys.readouterr().out)[0]["beams"])
    assert beams[0] == beams[1] != beams[2]


def test_window_refuses_a_kernel_without_one(window_dir):
    """A decode kernel without a window is refused by name, not run over the whole history."""
    model, tokenizer = load_model(window_dir)
    with pytest.raises(ValueError, match="sliding_window"):
        BeamSearch(model, tokenizer, CacheConfig(block_size=4, num_blocks=16), attn_impl="fused")
