"""`python -m benchmarks`: dispatch, the kernel ladder (tiny grid, in-process) and the memory subcommand.

Times are never asserted: only the shape of the output and that every impl was checked against the reference."""

from __future__ import annotations

import json
import os

import pytest
import torch

import benchmarks as bench
from paged.attention import DECODE_IMPLS
from benchmarks import kernels
from benchmarks.kernels import KernelCase, format_report, run_kernel_bench

pytestmark = pytest.mark.benchmarks

TINY = [KernelCase(batch=2, context_len=40, num_heads=4, num_kv_heads=2, head_dim=16),
        KernelCase(batch=1, context_len=33, num_heads=4, num_kv_heads=4, head_dim=16)]


@pytest.fixture
def tiny_bench(monkeypatch):
    """The quick grid shrunk to two tiny cases and a small bandwidth probe."""
    monkeypatch.setattr(kernels, "QUICK_GRID", dict(batch=(2,), context_len=(40,), num_kv_heads=(4, 2),
                                                    head_dim=(16,)))
    monkeypatch.setattr(kernels, "BANDWIDTH_MB", 8)


def test_every_impl_is_checked_then_timed():
    """Each case has sdpa, loop, gather and fused rows, each checked (✔, tiny error) and timed (ms > 0)."""
    report = run_kernel_bench(TINY, impls=["loop", "gather", "fused"], device="cpu", reps=1, warmup=0,
                              bandwidth_mb=8)
    assert report.read_bw_gbps > 0 and report.threads == torch.get_num_threads()
    for case in report.cases:
        assert [r.impl for r in case.results] == ["sdpa", "loop", "gather", "fused"]
        for r in case.results:
            assert r.ok and r.rel_err < 1e-5
            assert r.ms > 0 and r.gbps > 0 and r.pct_bw > 0 and r.x_sdpa > 0
        assert case.kv_bytes == 2 * case.case.batch * case.case.context_len * case.case.num_kv_heads * 16 * 4
    lines = format_report(report).splitlines()
    header = [line.split() for line in lines if line.split()[:2] == ["B", "ctx"]]
    assert header == [["B", "ctx", "heads", "d", "impl", "ok", "ms", "x", "sdpa", "x", "gather", "GB/s", "%", "bw"]]
    rows = [line.split() for line in lines if line.split()[:1] in (["1"], ["2"])]
    assert len(rows) == 4 * len(TINY) and all(row[5] == "✔" for row in rows)


def test_a_wrong_impl_is_marked_and_fails_the_run(monkeypatch, tiny_bench, capsys):
    """An impl returning wrong numbers gets ✗ in the table and a non-zero exit status."""
    monkeypatch.setitem(DECODE_IMPLS, "broken", lambda q, *args: torch.zeros_like(q))
    assert kernels.main(["--quick", "--impls", "gather,broken", "--reps", "1"]) == 1
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if " broken " in line]
    assert len(rows) == 2 and all(row[5] == "✗" for row in rows)


def test_loop_is_skipped_on_big_cases():
    """The per-token loop only runs where B * context_len <= LOOP_MAX_TOKENS."""
    big = KernelCase(batch=2, context_len=kernels.LOOP_MAX_TOKENS // 2 + 1, num_heads=2, num_kv_heads=1, head_dim=8)
    report = run_kernel_bench([big], impls=["loop", "gather"], device="cpu", reps=1, warmup=0, bandwidth_mb=8)
    assert [r.impl for r in report.cases[0].results] == ["sdpa", "gather"]


def test_quick_json_through_the_dispatcher(tiny_bench, capsys):
    """`python -m benchmarks kernels --quick --json` prints JSON with every impl checked, exit status 0."""
    assert bench.main(["kernels", "--quick", "--json", "--reps", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"device", "threads", "read_bw_gbps", "cases", "load_avg"} <= set(data) and len(data["cases"]) == 2
    for case in data["cases"]:
        impls = [r["impl"] for r in case["results"]]
        assert impls[0] == "sdpa" and {"gather", "fused", "native"} <= set(impls)
        assert all(r["ok"] and r["rel_err"] < 1e-4 and r["ms"] > 0 for r in case["results"])


def test_grid_can_be_narrowed_from_the_command_line(tiny_bench, capsys):
    """--batch/--context-len/--num-kv-heads/--head-dim pick points of the grid; a non-integer is a usage error."""
    assert kernels.main(["--quick", "--json", "--reps", "1", "--impls", "gather", "--batch", "1,3",
                         "--head-dim", "8", "--num-kv-heads", "1"]) == 0
    cases = [c["case"] for c in json.loads(capsys.readouterr().out)["cases"]]
    assert [(c["batch"], c["context_len"], c["num_kv_heads"], c["head_dim"]) for c in cases] == [(1, 40, 1, 8),
                                                                                                 (3, 40, 1, 8)]
    with pytest.raises(SystemExit):
        kernels.main(["--batch", "sixteen"])
    assert "comma-separated integers" in capsys.readouterr().err


def test_full_grid_is_the_stated_ladder():
    """The full grid is B in {1, 16, 64} x ctx {512, 2048} x kv heads {8, 2} x head_dim {64, 128}, 8 heads."""
    cases = kernels.cases_from_grid(kernels.FULL_GRID)
    assert len(cases) == 24 and {c.num_heads for c in cases} == {8} and {c.block_size for c in cases} == {16}
    assert {(c.batch, c.context_len) for c in cases} == {(b, n) for b in (1, 16, 64) for n in (512, 2048)}


def test_memory_subcommand_prints_json_and_table(capsys):
    """`python -m benchmarks memory` prints the table, and with --json the report as JSON."""
    assert bench.main(["memory", "--requests", "50"]) == 0
    assert "paged bs=16" in capsys.readouterr().out
    assert bench.main(["memory", "--requests", "50", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["spec"]["num_requests"] == 50 and len(data["results"]) == 11


def test_dispatch_table_is_extensible_and_errors_are_clear(monkeypatch, capsys):
    """Unknown or unimportable subcommands exit 2 with a message; a new entry is dispatched with its argv."""
    assert {"kernels", "memory", "engine"} <= set(bench.SUBCOMMANDS)
    assert bench.main(["app"]) == 2 and "python -m ui.bench" in capsys.readouterr().err  # lives with the app now
    assert bench.main(["nope"]) == 2 and "unknown bench subcommand" in capsys.readouterr().err
    monkeypatch.setitem(bench.SUBCOMMANDS, "ghost", "paged.no_such_module:main")
    assert bench.main(["ghost"]) == 2 and "not available" in capsys.readouterr().err
    calls = []
    monkeypatch.setattr(kernels, "fake_main", lambda argv: calls.append(argv) or 3, raising=False)
    monkeypatch.setitem(bench.SUBCOMMANDS, "fake", "benchmarks.kernels:fake_main")
    assert bench.main(["fake", "a", "b"]) == 3 and calls == [["a", "b"]]
    with pytest.raises(ValueError, match="unknown bench subcommand"):
        bench.resolve("nope")


def test_oversubscribed_machine_is_flagged():
    """The header warns when the load average exceeds the cores and OpenMP threads may spin; not otherwise."""
    busy = kernels.KernelReport("cpu", 2, 10.0, [], load_avg=100.0 + (os.cpu_count() or 1))
    assert "warning: load" in format_report(busy) and "OMP_WAIT_POLICY=passive" in format_report(busy)
    busy.omp_wait_policy = "passive"
    assert "warning" not in format_report(busy)
    assert "warning" not in format_report(kernels.KernelReport("cpu", 2, 10.0, [], load_avg=0.0))


# --- the engine benchmark's HF column ------------------------------------------------------------------------------
def _decisive_tiny_llama():
    """A 2-layer random TinyLlama whose weights are large enough that greedy picks have clear margins."""
    from paged.config import ModelConfig
    from paged.model import TinyLlama

    torch.manual_seed(0)
    model = TinyLlama(ModelConfig(vocab_size=259, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.rand_like(p) + 0.5 if name.endswith("norm.weight") else torch.randn_like(p) * 0.3)
    return model.eval()


def test_hf_column_tokens_equal_transformers_greedy(tmp_path):
    """bench_engine's HF column: the engine's tokens and the padded HF batch's tokens both equal transformers' own
    greedy generate, run here prompt by prompt (no padding) on the model saved to disk and read back."""
    transformers = pytest.importorskip("transformers")
    from benchmarks.engine import _prompts, bench_engine, format_table
    from paged.model import ByteTokenizer, save_model

    model, tokenizer = _decisive_tiny_llama(), ByteTokenizer()
    rows = bench_engine(batches=(3,), max_tokens=6, reps=1, model=model, tokenizer=tokenizer, hf=True, clock="cpu")
    save_model(model, tmp_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    expected = []
    for prompt in _prompts(3):
        ids = torch.tensor([tokenizer.encode(prompt)])
        out = theirs.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False, eos_token_id=None,
                              pad_token_id=0)
        expected.append(out[0, ids.shape[1]:].tolist())
    row = rows[0]
    assert row["hf_tokens"] == expected and row["tokens"] == expected and row["hf_same"] == 3
    assert row["hf_tok_s"] > 0 and row["vs_hf"] > 0
    table = format_table(rows)
    assert "paged/HF" in table and "✔ 3/3" in table
    with pytest.raises(ValueError, match="clock must be one of"):
        bench_engine(batches=(1,), max_tokens=1, reps=1, model=model, tokenizer=tokenizer, hf=False, clock="sundial")


def agree_with_vllm(monkeypatch, off: int = 0) -> None:
    """vLLM's child stubbed: it returns the engine's own tokens for every batch, `off` of them changed."""
    import benchmarks.engine as engine_bench
    from paged.model import load_model

    from helpers import FakeVLLM

    model, tok = load_model()
    monkeypatch.setattr(engine_bench, "open_vllm",
                        lambda *args: (FakeVLLM(model, tok, [1.0] * 100, [], off=off), None))


def test_a_vllm_disagreement_is_shown_and_fails_the_run(monkeypatch, capsys):
    """When vLLM's tokens differ from the engine's for one sequence, its table says ✗ and the exit status is 1; when
    they agree, 0."""
    from benchmarks import engine as engine_bench

    agree_with_vllm(monkeypatch)
    assert engine_bench.main(["--batches", "2", "--max-tokens", "2", "--reps", "1", "--no-hf", "--workloads",
                              "same"]) == 0
    assert "✔ 2/2" in capsys.readouterr().out
    agree_with_vllm(monkeypatch, off=1)
    assert engine_bench.main(["--batches", "2", "--max-tokens", "2", "--reps", "1", "--no-hf", "--workloads",
                              "same"]) == 1
    assert "✗ 1/2" in capsys.readouterr().out


def test_hf_disagreement_is_shown_and_fails_the_run(monkeypatch, capsys):
    """When HF's tokens differ from the engine's, the table says ✗ with the count and the exit status is 1."""
    pytest.importorskip("transformers")
    from benchmarks import engine as engine_bench

    real = engine_bench.run_hf

    def off_by_one(hf, token_ids, max_tokens, clock="wall"):
        secs, tokens = real(hf, token_ids, max_tokens, clock)
        return secs, [[(t + 1) % 259 for t in row] for row in tokens[:-1]] + tokens[-1:]

    monkeypatch.setattr(engine_bench, "run_hf", off_by_one)
    agree_with_vllm(monkeypatch)  # vLLM's own column is not what this test is about: no 14 s vLLM start
    assert engine_bench.main(["--batches", "2", "--max-tokens", "3", "--reps", "1", "--workloads", "same"]) == 1
    out = capsys.readouterr().out
    assert "✗ 1/2" in out and "load average" in out


# --- the server-like workloads (benchmarks.workloads) ------------------------------------------------------------
def test_mixed_requests_are_seeded_and_within_their_ranges():
    from benchmarks.workloads import MIN_NEW, PROMPT_CHARS, mixed_requests

    reqs = mixed_requests(50, seed=3)
    assert reqs == mixed_requests(50, seed=3) and reqs != mixed_requests(50, seed=4)
    assert all(MIN_NEW <= r.max_tokens <= 128 and PROMPT_CHARS[0] <= len(r.prompt) <= PROMPT_CHARS[1] for r in reqs)
    assert len({r.max_tokens for r in reqs}) > 10 and len({len(r.prompt) for r in reqs}) > 10
    short = {r.max_tokens for r in mixed_requests(20, max_new=5)}
    assert short <= set(range(1, 6)) and len(short) > 2
    with pytest.raises(ValueError, match="must be >= 1"):
        mixed_requests(0)


def test_queue_workload_pool_holds_the_running_requests_without_preemption(monkeypatch):
    """run_engine sizes its pool for the requests that run at once (batch x the longest, not one per queued
    request): a queue of 2 x batch mixed requests runs with no preemption (the README's numbers assume none), every
    request gets its max_tokens, and the tokens equal the contiguous twin's."""
    from paged.addressing import blocks_needed
    from paged.config import SamplingParams
    from benchmarks import workloads
    from paged.engine import LLMEngine
    from helpers import tiny_model

    model, tok = tiny_model()
    preempted, engines = [], []

    class Spy(LLMEngine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            engines.append(self)

        def step(self):
            trace = super().step()
            preempted.extend(trace.preempted)
            return trace

    monkeypatch.setattr(workloads, "LLMEngine", Spy)
    requests = workloads.mixed_requests(6, seed=1, max_new=20)
    _, tokens = workloads.run_engine(model, tok, requests, batch=3, block_size=4, attn_impl="gather")
    longest = max(len(r.prompt) for r in requests) + max(r.max_tokens for r in requests)
    (engine,) = engines
    assert engine.num_blocks == 3 * blocks_needed(longest, 4) + 8
    assert preempted == [] and all(s.preemptions == 0 for s in engine.sequences.values())
    assert [len(t) for t in tokens] == [r.max_tokens for r in requests]
    twin = LLMEngine(model, tok, kv_layout="contiguous")
    want = [twin.generate([r.prompt], SamplingParams(max_tokens=r.max_tokens, ignore_eos=True))[0].token_ids
            for r in requests]
    assert tokens == want


def test_queue_workload_agrees_with_transformers_request_by_request(tmp_path):
    """Twice the batch in requests of different lengths: the engine's tokens of each request equal transformers'
    own greedy generate run on that request alone (no padding, exactly its max_tokens), and so do the first
    max_tokens tokens of the static batches; useful tokens are the ones requested."""
    transformers = pytest.importorskip("transformers")
    from benchmarks.engine import hf_twin
    from benchmarks.workloads import bench_workload, format_workloads, mixed_requests
    from paged.model import ByteTokenizer, save_model

    model, tokenizer = _decisive_tiny_llama(), ByteTokenizer()
    row = bench_workload("queue", 2, model, tokenizer, hf_twin(model), reps=1, clock="cpu", max_new=7)
    reqs = mixed_requests(4, seed=2, max_new=7)
    save_model(model, tmp_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    expected = []
    for r in reqs:
        ids = torch.tensor([tokenizer.encode(r.prompt)])
        out = theirs.generate(ids, max_new_tokens=r.max_tokens, min_new_tokens=r.max_tokens, do_sample=False,
                              eos_token_id=None, pad_token_id=0)
        expected.append(out[0, ids.shape[1]:].tolist())
    assert row["tokens"] == expected and row["hf_tokens"] == expected and row["hf_same"] == row["requests"] == 4
    assert row["useful_tokens"] == sum(r.max_tokens for r in reqs) <= row["hf_generated"]
    assert "✔ 4/4" in format_workloads([row])
    with pytest.raises(ValueError, match="workload must be one of"):
        bench_workload("burst", 2, model, tokenizer, None)


def test_workload_disagreement_fails_the_run(monkeypatch, capsys):
    """A request whose tokens differ from HF's is counted, shown as ✗ and makes the exit status 1."""
    pytest.importorskip("transformers")
    from benchmarks import engine as engine_bench
    from benchmarks import workloads

    real = workloads.run_hf_batches

    def off_by_one(hf, tokenizer, requests, batch, clock="wall"):
        secs, tokens = real(hf, tokenizer, requests, batch, clock)
        return secs, [[(t + 1) % 259 for t in tokens[0]]] + tokens[1:]

    monkeypatch.setattr(workloads, "run_hf_batches", off_by_one)
    argv = ["--batches", "2", "--max-tokens", "3", "--reps", "1", "--workloads", "mixed", "--clock", "cpu"]
    assert engine_bench.main(argv) == 1
    out = capsys.readouterr().out
    assert "✗ 1/2" in out and "mixed" in out and "tokens requested / time" in out
    with pytest.raises(SystemExit):
        engine_bench.main(["--workloads", "burst"])
