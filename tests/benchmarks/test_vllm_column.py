"""The bench's vLLM column: vLLM's repetitions interleaved with the engine's, its ratio as the median and spread of
the per-repetition ratios, its tokens checked against the paged engine's."""

from __future__ import annotations

import pytest

from benchmarks.engine import bench_engine
from benchmarks.hf import ratios
from benchmarks.vllm_column import format_vllm

from helpers import FakeVLLM, tiny_model

pytestmark = pytest.mark.benchmarks


def test_ratios_are_the_median_and_spread_of_per_repetition_ratios():
    """Their seconds over ours per repetition, worked by hand: 2/1, 3/2 and 1/4 -> median 1.5, spread 0.25–2."""
    assert ratios([1.0, 2.0, 4.0], [2.0, 3.0, 1.0]) == (1.5, 0.25, 2.0)
    with pytest.raises(ValueError):
        ratios([1.0], [1.0, 2.0])


def test_vllm_runs_interleaved_and_its_ratio_spread_is_reported(monkeypatch):
    """Three repetitions: paged, contiguous and vLLM take turns (never all of one first); paged/vLLM is vLLM's
    seconds over paged's per repetition, median and min–max; equal tokens are counted, a changed one is not."""
    import benchmarks.engine as engine_bench

    model, tok = tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    calls = []
    real = engine_bench.run_once

    def run_once(*args, **kwargs):
        calls.append(args[2])
        secs, tokens = real(*args, **kwargs)
        return 1.0, tokens  # paged and contiguous: 1 s each repetition

    monkeypatch.setattr(engine_bench, "run_once", run_once)
    fake = FakeVLLM(model, tok, [2.0, 0.5, 4.0], calls, off=1)
    rows = bench_engine(batches=(2,), max_tokens=3, reps=3, model=model, tokenizer=tok, hf=False, vllm=fake)
    assert calls == ["paged"] + ["paged", "contiguous", "vllm"] * 3  # a warm-up, then the rotation
    row = rows[0]
    assert (row["vs_vllm"], row["vs_vllm_min"], row["vs_vllm_max"]) == (2.0, 0.5, 4.0)
    assert row["vllm_same"] == 1 and row["vllm_tok_s"] == 2 * 3 / 2.0
    table = format_vllm(rows, "stub")
    assert "2.00x (0.50–4.00)" in table and "✗ 1/2" in table and "prefix caching off" in table


def test_pool_sweep_alternates_pools_and_keeps_tokens(monkeypatch):
    """bench_pools: each repetition runs every pool (in turn forwards, then backwards), the tokens of every pool equal
    the smallest pool's, vs_smallest is the smallest pool's seconds over this pool's; a pool too small is refused."""
    import benchmarks.engine as engine_bench

    model, tok = tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    pools_run = []
    real = engine_bench.run_once

    def run_once(*args, num_blocks=None, **kwargs):
        pools_run.append(num_blocks)
        secs, tokens = real(*args, num_blocks=num_blocks, **kwargs)
        return {None: 0.0, 64: 1.0, 1024: 2.0}[num_blocks], tokens

    monkeypatch.setattr(engine_bench, "run_once", run_once)
    rows = engine_bench.bench_pools(batches=(2,), pools=(64, 1024), max_tokens=3, reps=2, model=model,
                                    tokenizer=tok)
    assert pools_run == [None, 64, 1024, 1024, 64]  # a warm-up, then the two orders
    assert [(r["num_blocks"], r["identical"], r["vs_smallest"]) for r in rows] == [(64, True, 1.0), (1024, True, 0.5)]
    assert "0.50x (0.50–0.50)" in engine_bench.format_pools(rows)
    with pytest.raises(ValueError, match="batch 2 at 3 new tokens needs"):
        engine_bench.bench_pools(batches=(2,), pools=(4, 64), max_tokens=3, reps=1, model=model, tokenizer=tok)
