"""The engine's greedy tokens against the real vLLM's `LLM` on the shipped model (block size 32, one vLLM start)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.model.data import random_text, recall_prompt
from paged.model.io import load_model

from vllm_util import need_vllm

pytestmark = pytest.mark.benchmarks

WEIGHTS = Path(__file__).resolve().parents[2] / "paged" / "model" / "weights"


@pytest.mark.slow
def test_engine_greedy_tokens_equal_vllm_llm():
    """24 recall prompts, 40 new tokens each, on a 40-block pool of 32-token blocks (too small for all at once, so
    both preempt): every request's greedy tokens equal vLLM's, token for token."""
    need_vllm()
    from benchmarks.vllm_llm import vllm_greedy

    rng = random.Random(7)
    prompts = [recall_prompt(random_text(rng, 40, 100)) for _ in range(24)]
    model, tok = load_model(WEIGHTS)
    engine = LLMEngine(model, tok, CacheConfig(block_size=32, num_blocks=40, watermark=0.0),
                       SchedulerConfig(max_num_seqs=24), attn_impl="gather", record=False)
    ids = [engine.add_request(p, SamplingParams(max_tokens=40, ignore_eos=True)) for p in prompts]
    preempted = 0
    while engine.has_unfinished():
        preempted += len(engine.step().preempted)
    ours = [engine.output(i).token_ids for i in ids]
    assert preempted > 0, "the pool must be small enough that our engine preempts"
    theirs = vllm_greedy(WEIGHTS, prompts, 40, block_size=32, num_blocks=40, max_num_seqs=24)
    assert theirs["version"] == "0.32.0" and theirs["preemptions"] > 0, "vLLM must preempt too"
    assert all(len(t) == 40 for t in theirs["tokens"])
    diffs = [i for i, (a, b) in enumerate(zip(ours, theirs["tokens"])) if a != b]
    assert not diffs, f"requests {diffs} differ from vLLM "
