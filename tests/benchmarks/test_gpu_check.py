"""scripts/gpu_check.sh: its CPU-safe parts run in CI (--device cpu --quick) with the app's packages blocked, a broken
impl is reported as failed, and the GPU-only verdicts (performance targets) read their numbers right."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from paged.attention import DECODE_IMPLS
from benchmarks import gpu_check
from benchmarks.gpu_verdicts import format_summary, verdicts
from paged.kernels import triton_available

pytestmark = pytest.mark.benchmarks

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("streamlit", "plotly", "transformers", "hypothesis", "pytest")

# Loaded by the child through PYTHONPATH: any import of a blocked package (or one of its submodules) raises
# ImportError, as on a GPU machine that lacks them; the marker file proves the blocker was in place.
SITECUSTOMIZE = """
import sys

BLOCKED = {blocked!r}


class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked for this test (the GPU image has no such package)")
        return None


sys.meta_path.insert(0, _Block())
open({marker!r}, "w").write("blocker active")
"""


def _run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "blocker_marker"
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(blocked=BLOCKED, marker=str(marker)))
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1",
           "TRITON_INTERPRET": "1"}
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), str(out), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert marker.read_text() == "blocker active"
    report = json.loads((out / "gpu_check.json").read_text()) if (out / "gpu_check.json").exists() else {}
    return proc, report


@pytest.mark.slow
def test_quick_cpu_run_passes_with_app_packages_blocked(tmp_path):
    """The wrapper runs every section on the CPU with streamlit/plotly/transformers/hypothesis/pytest unimportable;
    the JSON has every field, every parity case and every engine check passed, and the summary says so."""
    proc, report = _run_script(tmp_path, "--device", "cpu", "--quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report["ok"] is True and report["device"] == "cpu" and report["quick"] is True
    assert {"python", "torch", "triton", "cuda", "gpu", "threads"} <= set(report["versions"])
    assert set(report["seconds"]) == set(gpu_check.SECTIONS)

    parity = report["sections"]["parity"]
    impls = {r["impl"] for r in parity}
    assert {"loop", "gather", "fused"} <= impls and (not triton_available() or "triton" in impls)
    assert parity and all(r["ok"] and r["rel_err"] < r["tol"] for r in parity)
    assert {r["dtype"] for r in parity} == {"float32", "float16", "bfloat16"}
    assert {r["block_size"] for r in parity if r["impl"] == "triton"} <= {1, 16}  # never 3: not a power of two

    engine = report["sections"]["engine"]
    assert engine["twins"] and all(t["identical"] for t in engine["twins"])
    assert all(n["same_tokens"] for n in engine["no_cache"]) and len(engine["no_cache"]) == 5
    assert engine["negative_control"]["detected"] is True
    assert engine["prefix_caching"]["same_tokens"] is True and engine["prefix_caching"]["blocks_hit"] > 0

    kernels = report["sections"]["kernels"]
    assert kernels["copy_bw_gbps"] > 0
    rows = [r for c in kernels["bench"]["cases"] for r in c["results"]]
    assert rows and all(r["ok"] and r["pct_copy_bw"] > 0 for r in rows)
    assert all(r["identical"] for r in report["sections"]["bench"]["device"])

    statuses = {(v["kind"], v["status"]) for v in report["verdicts"]}
    assert ("check", "fail") not in statuses and ("target", "skip") in statuses  # targets need a GPU
    summary = (tmp_path / "out" / "gpu_check.txt").read_text()
    assert "result: OK" in summary and "needs a CUDA GPU" in summary and "torch " + torch.__version__ in summary


def test_a_broken_impl_fails_the_run(tmp_path, monkeypatch, capsys):
    """An impl that reads its neighbour's history fails every parity case and its engine twin, and only those;
    the exit status is 1 and the summary names the failed checks."""
    gather = DECODE_IMPLS["gather"]
    monkeypatch.setitem(DECODE_IMPLS, "gather", lambda q, kc, vc, tables, lens, scale:
                        gather(q, kc, vc, tables.roll(1, 0), lens.roll(1, 0), scale))
    assert gpu_check.main([str(tmp_path), "--device", "cpu", "--quick", "--sections", "parity,engine"]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    parity = report["sections"]["parity"]
    assert all(not r["ok"] for r in parity if r["impl"] == "gather")
    assert all(r["ok"] for r in parity if r["impl"] != "gather")
    twins = {t["impl"]: t["identical"] for t in report["sections"]["engine"]["twins"]}
    assert twins["gather"] is False and all(ok for impl, ok in twins.items() if impl != "gather")
    summary = (tmp_path / "gpu_check.txt").read_text()
    assert "FAIL   check  parity sweep" in summary and "FAIL   check  engine twins" in summary
    assert "result: FAILED" in summary and report["ok"] is False


def test_a_crashing_section_is_a_failure_and_the_next_one_still_runs(tmp_path, monkeypatch):
    """An exception in one section (say, a kernel that does not compile) is recorded as a failed check; the
    sections after it still run and are reported."""
    def crash(*args, **kwargs):
        raise RuntimeError("triton: out of resources")

    monkeypatch.setattr(gpu_check, "run_kernel_bench", crash)
    assert gpu_check.main([str(tmp_path), "--device", "cpu", "--quick", "--sections", "kernels,bench"]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["errors"] == {"kernels": "RuntimeError: triton: out of resources"}
    assert "kernels" not in report["sections"]
    assert all(r["identical"] for r in report["sections"]["bench"]["device"])
    assert "FAIL   check  section kernels ran to its end" in (tmp_path / "gpu_check.txt").read_text()


def test_asking_for_cuda_without_one_is_a_usage_error(capsys):
    """--device cuda on a machine where torch sees no GPU exits 2 with a message saying so."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(SystemExit) as exc:
        gpu_check.main(["unused", "--device", "cuda"])
    assert exc.value.code == 2 and "sees no CUDA device" in capsys.readouterr().err


def _gpu_report(triton_pcts: dict, cuda_tok_s: float, cpu_tok_s: float) -> gpu_check.Report:
    """A hand-written report as a GPU run would leave it (kernels and bench sections only)."""
    cases = [{"case": {"batch": b, "context_len": n},
              "results": [{"impl": "triton", "ok": True, "gbps": 48.0 * pct, "pct_copy_bw": pct},
                          {"impl": "gather", "ok": True, "gbps": 1000.0, "pct_copy_bw": 20.0}]}
             for (b, n), pct in triton_pcts.items()]
    bench_row = dict(batch=32, new_tokens=64, paged_tok_s=cuda_tok_s, contiguous_tok_s=100.0, ratio=1.0,
                     ratio_min=0.9, ratio_max=1.1,  # bench_engine's rows carry the spread
                     identical=True)
    report = gpu_check.Report("cuda:0", False, dict(python="3.12", torch="2.11", triton="3.6", cuda="13.0",
                                                   gpu="NVIDIA H200", gpu_capability="9.0", threads=16))
    report.sections = {"kernels": dict(copy_bw_gbps=4800.0, bench={"cases": cases}, table="(table)"),
                       "bench": dict(device=[bench_row], cpu=[{**bench_row, "paged_tok_s": cpu_tok_s}])}
    return report


def test_gpu_targets_are_met_or_missed_from_the_numbers():
    """triton's target counts only B 16-64 at ctx 2048-8192 and needs every such case >= 70% of copy bandwidth;
    the engine target compares batch-32 paged tok/s on cuda and on the CPU. A miss is reported, not a failure."""
    report = _gpu_report({(16, 2048): 75.0, (64, 8192): 71.0, (1, 2048): 5.0, (16, 512): 10.0}, 900.0, 800.0)
    by_kind = {v.name.split(" ")[0]: v for v in verdicts(report) if v.kind == "target"}
    assert by_kind["triton"].status == "pass" and "B=1 " not in by_kind["triton"].detail
    assert by_kind["engine"].status == "pass" and "1.12x" in by_kind["engine"].detail

    report = _gpu_report({(16, 2048): 75.0, (32, 4096): 69.0}, 700.0, 800.0)
    report.verdicts = verdicts(report)
    by_kind = {v.name.split(" ")[0]: v for v in report.verdicts if v.kind == "target"}
    assert by_kind["triton"].status == "fail" and "69%" in by_kind["triton"].detail
    assert by_kind["engine"].status == "fail"
    assert report.ok  # targets never fail the run
    summary = format_summary(report)
    assert summary.count("MISSED") == 2 and "NVIDIA H200" in summary and "result: OK" in summary


def test_engine_bench_times_between_device_syncs(monkeypatch):
    """bench engine brackets each timed generate with a device sync (CUDA runs asynchronously), on the model's
    device; the sync is a no-op on the CPU and torch.cuda.synchronize on CUDA."""
    from benchmarks import engine as bench
    from paged.model import load_model

    calls = []
    monkeypatch.setattr(bench, "_sync", lambda device: calls.append(("sync", device.type)))
    generate = bench.LLMEngine.generate
    monkeypatch.setattr(bench.LLMEngine, "generate", lambda self, *a, **k: calls.append("generate") or
                        generate(self, *a, **k))
    model, tok = load_model(device="cpu")
    bench.run_once(model, tok, "paged", ["abc"], 2, 16, "gather")
    assert calls == [("sync", "cpu"), "generate", ("sync", "cpu")]

    monkeypatch.undo()
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    bench._sync(torch.device("cpu"))
    assert synced == []
    bench._sync(torch.device("cuda"))
    assert synced == [torch.device("cuda")]


def test_engine_bench_device_option(capsys):
    """`bench engine --device cpu --json` runs there; --device cuda without a GPU is a usage error."""
    from benchmarks import engine as bench

    assert bench.main(["--device", "cpu", "--batches", "1", "--max-tokens", "2", "--reps", "1", "--workloads", "same",
                       "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["batch"] for r in rows] == [1] and rows[0]["identical"] is True
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bench.main(["--device", "cuda"])
        assert "sees no CUDA device" in capsys.readouterr().err


def test_fill_pool_writes_what_it_keeps_contiguous():
    """Each sequence's K/V read back from the pool token by token (block_table[t // bs] * bs + t % bs, by hand)
    equal the float64 contiguous copy; past each end the copy holds `fill`; blocks no table names are untouched."""
    from benchmarks.device_checks import fill_pool

    key_cache = torch.full((7, 4, 2, 3), 5.0)
    value_cache = key_cache.clone()
    tables, lens = [[6, 1], [3], [0, 4]], [6, 2, 5]
    keys, values = fill_pool(key_cache, value_cache, tables, lens, torch.Generator().manual_seed(0), fill=-9.0)
    assert keys.shape == values.shape == (3, 6, 2, 3) and keys.dtype == torch.float64
    for b, (table, n) in enumerate(zip(tables, lens)):
        for t in range(n):
            block, offset = table[t // 4], t % 4
            assert torch.equal(key_cache[block, offset].double(), keys[b, t])
            assert torch.equal(value_cache[block, offset].double(), values[b, t])
        assert bool((keys[b, n:] == -9.0).all()) and bool((values[b, n:] == -9.0).all())
    assert bool((key_cache[[2, 5]] == 5.0).all())
    assert not torch.equal(keys, values)


def test_the_device_check_covers_every_registered_impl(monkeypatch):
    """impls_for reads the one impl list (DECODE_IMPLS): a newly registered impl is swept too; on a GPU the C
    kernel is skipped with its reason."""
    from benchmarks.device_checks import impls_for

    monkeypatch.setitem(DECODE_IMPLS, "extra", DECODE_IMPLS["loop"])
    impls, skipped = impls_for(torch.device("cpu"))
    assert "extra" in impls and set(impls) | set(skipped) == set(DECODE_IMPLS)
    impls, skipped = impls_for(torch.device("cuda"))
    assert "native" in skipped and "native" not in impls and "extra" in impls
