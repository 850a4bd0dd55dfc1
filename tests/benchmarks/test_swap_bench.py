"""`python -m benchmarks swap`: bytes swapped and tokens recomputed per block size, in one run."""

import json

import pytest

from benchmarks import main as bench_main
from benchmarks.swap import measure

pytestmark = pytest.mark.benchmarks


def test_rows_count_the_bytes_each_block_size_moves(shipped):
    """Each row swaps ceil(context / block_size) whole blocks out and back (K and V, every layer, fp32) and
    recomputes every token; times are positive and the ratios are the times' quotients."""
    model, _ = shipped
    cfg = model.config
    rows = measure(model, (1, 8, 32), context_len=40, repeats=1)
    per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 4  # K + V bytes, fp32
    for row, blocks in zip(rows, (40, 5, 2)):
        assert row["blocks"] == blocks
        assert row["swap_bytes"] == 2 * blocks * row["block_size"] * per_token  # out, then back in
        assert row["recompute_tokens"] == 40
        assert min(row["swap_ms"], row["swap_per_block_ms"], row["recompute_ms"]) > 0
        assert row["recompute_over_swap"] == pytest.approx(row["recompute_ms"] / row["swap_ms"])


def test_cli_prints_json_and_refuses_bad_sizes(capsys):
    """--json gives one row per block size asked for; a block size of 0 or an unknown device is an error (status 2)."""
    assert bench_main(["swap", "--block-sizes", "4,16", "--context-len", "24", "--repeats", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["block_size"] for r in report["rows"]] == [4, 16] and report["context_len"] == 24
    assert bench_main(["swap", "--block-sizes", "0"]) == 2
    assert "block sizes" in capsys.readouterr().err
    assert bench_main(["swap", "--device", "nowhere"]) == 2 and "nowhere" in capsys.readouterr().err
