"""`python -m paged generate` and the engine benchmark, run as a user would."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.cli

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
    from benchmarks.engine import bench_engine, format_table
    rows = bench_engine(batches=(2,), max_tokens=4, reps=1)
    assert rows[0]["identical"] and rows[0]["paged_tok_s"] > 0 and rows[0]["contiguous_tok_s"] > 0
    assert "paged/contig" in format_table(rows)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_generate_runs_a_local_hf_checkpoint(tmp_path, arch):
    """generate --model DIR on a transformers-built Llama / Qwen2 / Qwen3 directory prints the same greedy text
    as transformers' generate decodes."""
    transformers = pytest.importorskip("transformers")
    from hf_tiny import build_checkpoint

    theirs = build_checkpoint(tmp_path, arch)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ids = torch.tensor([hf_tokenizer("A block table maps").input_ids])
    new = theirs.generate(ids, max_new_tokens=10, do_sample=False)[0, ids.shape[1]:].tolist()
    proc = run_cli("generate", "A block table maps", "--model", str(tmp_path), "--max-tokens", "10", "--quiet")
    assert proc.returncode == 0, proc.stderr
    expected = hf_tokenizer.decode(new, skip_special_tokens=True) + "\n"
    # text=True reads stdout with universal newlines: random tokens may hold a lone \r, read back as \n.
    assert proc.stdout == expected.replace("\r\n", "\n").replace("\r", "\n")


def test_generate_refuses_a_broken_model_dir_cleanly(tmp_path):
    """A directory that cannot be loaded exits with status 2 and the loader's one-line reason, no traceback."""
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    proc = run_cli("generate", "hi", "--model", str(tmp_path))
    assert proc.returncode == 2 and "model_type must be one of" in proc.stderr and "Traceback" not in proc.stderr


def test_engine_bench_on_a_model_directory(tmp_path, capsys):
    """bench engine --model DIR reports tokens/s for that model, both layouts giving the same tokens."""
    pytest.importorskip("transformers")
    from hf_tiny import build_checkpoint
    from benchmarks.engine import main as bench_main

    build_checkpoint(tmp_path, "qwen3")
    assert bench_main(["--model", str(tmp_path), "--max-tokens", "4", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) in out and "paged tok/s" in out and "✔" in out


@pytest.mark.slow
def test_engine_bench_random_135m_runs(capsys):
    """--random-135m builds SmolLM2-135M's shape (random weights, nothing downloaded) and reports its tokens/s."""
    from benchmarks.engine import main as bench_main

    assert bench_main(["--random-135m", "--max-tokens", "2", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    assert "random SmolLM2-135M shape (134.5 M parameters" in out and "✔" in out


def test_impl_choices_are_the_registered_impls(monkeypatch, capsys):
    """--impl accepts every impl registered behind paged_attention_decode (a new kernel needs no CLI edit)."""
    from paged import attention
    from paged.__main__ import generate_main

    monkeypatch.setitem(attention.DECODE_IMPLS, "toy", attention.DECODE_IMPLS["gather"])
    assert generate_main(["Hi", "--max-tokens", "2", "--impl", "toy", "--quiet"]) == 0
    assert capsys.readouterr().out.strip()
    with pytest.raises(SystemExit):
        generate_main(["Hi", "--impl", "magic"])


def test_generate_json_lists_one_object_per_prompt():
    """--json prints only a JSON list on stdout, one object per prompt, whose token_ids are the engine's own
    greedy tokens for that prompt (checked against a run through the library)."""
    proc = run_cli("generate", "Hello", "1 2 3", "--max-tokens", "5", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["prompt"] for r in rows] == ["Hello", "1 2 3"]
    from paged.config import SamplingParams
    from paged.engine import LLMEngine
    from paged.model import load_model
    model, tok = load_model(None)
    outs = LLMEngine(model, tok).generate(["Hello", "1 2 3"], SamplingParams(max_tokens=5))
    assert [r["token_ids"] for r in rows] == [o.token_ids for o in outs]
    assert all(r["text"] == o.text and r["finish_reason"] == o.finish_reason for r, o in zip(rows, outs))
