"""The bench's vLLM column: tok/s from generate's median time, tokens checked against the paged engine's."""

from __future__ import annotations

import pytest

import benchmarks.vllm_llm as vllm_llm
from benchmarks.vllm_column import format_vllm, vllm_column

pytestmark = pytest.mark.benchmarks


def test_column_rates_and_checks_tokens(monkeypatch):
    """With vLLM's runs stubbed (times and tokens given): tok/s = batch x new tokens / the median time, paged/vLLM
    is the ratio of rates, and a sequence whose tokens differ is counted and shown as a mismatch."""
    seen = {}

    def fake_runs(model_dir, batches, max_tokens, reps, **kw):
        seen.update(batches=batches, max_tokens=max_tokens, reps=reps, **kw)
        return dict(version="0.32.0", preemptions=0, runs=[
            dict(tokens=[[1, 2]], seconds=[0.5, 0.1, 0.2]),
            dict(tokens=[[3, 4], [9, 9]], seconds=[0.4])])

    monkeypatch.setattr(vllm_llm, "vllm_runs", fake_runs)
    rows = [dict(batch=1, paged_tok_s=30.0, tokens=[[1, 2]]), dict(batch=2, paged_tok_s=5.0, tokens=[[3, 4], [5, 6]])]
    cols = vllm_column(rows, {1: [[7]], 2: [[7], [8]]}, None, 2, 3, 1)
    assert seen["batches"] == [[[7]], [[7], [8]]] and seen["reps"] == 3 and seen["max_num_seqs"] == 2
    assert [c["vllm_tok_s"] for c in cols] == [1 * 2 / 0.2, 2 * 2 / 0.4]
    assert [round(c["vs_vllm"], 6) for c in cols] == [3.0, 0.5]
    assert [c["vllm_same"] for c in cols] == [1, 1]
    table = format_vllm(cols)
    assert "✔ 1/1" in table and "✗ 1/2" in table and "vLLM 0.32.0" in table
