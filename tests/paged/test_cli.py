"""`python -m paged generate` and the engine benchmark, run as a user would."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paged", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_generate_streams_text_and_writes_trace(tmp_path):
    """generate prints the continuation, one summary line per step, and a JSON trace whose steps follow the rule."""
    trace_file = tmp_path / "trace.json"
    proc = run_cli("generate", "Hello", "--max-tokens", "6", "--block-size", "4", "--num-blocks", "32",
                   "--trace", str(trace_file))
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(trace_file.read_text())
    assert [s["phase"] for s in steps] == ["prefill"] + ["decode"] * 5
    assert proc.stderr.count("[step") == 6
    cached = [s["seqs"][0]["cached_token_count"] for s in steps]
    assert cached == list(range(6, 12))  # BOS + 5 bytes, then +1 per decode step
    assert steps[-1]["num_free_blocks"] == 32


def test_generate_bad_input_is_a_clear_error():
    """A bad block size or an empty prompt exits with status 2 and a one-line error, not a traceback."""
    proc = run_cli("generate", "Hello", "--block-size", "0")
    assert proc.returncode == 2 and "block_size" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("generate", "")
    assert proc.returncode == 2 and "empty" in proc.stderr


def test_every_impl_gives_the_same_text():
    """--impl picks the decode attention; the per-token loop and the C kernel continue a prompt identically
    (greedy), and the chosen impl is named on stderr."""
    texts = {}
    for impl in ("loop", "native"):
        proc = run_cli("generate", "1 2 3 4 5 6", "--max-tokens", "12", "--impl", impl)
        assert proc.returncode == 0, proc.stderr
        assert f"decode impl {impl}" in proc.stderr
        texts[impl] = proc.stdout
    assert texts["loop"] == texts["native"] and texts["loop"].strip()
    proc = run_cli("generate", "Hello", "--impl", "magic")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_engine_bench_reports_parity():
    """The engine benchmark runs both layouts on the same requests and reports identical tokens."""
    from paged.engine.bench import bench_engine, format_table
    rows = bench_engine(batches=(2,), max_tokens=4, reps=1)
    assert rows[0]["identical"] and rows[0]["paged_tok_s"] > 0 and rows[0]["contiguous_tok_s"] > 0
    assert "paged/contig" in format_table(rows)
