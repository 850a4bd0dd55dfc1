"""`python -m paged bench ...` forwards to `python -m benchmarks ...`: the library never imports the benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmarks

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m <args>` in `cwd` (with PYTHONPATH set to `pythonpath` only, when given)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_paged_bench_forwards_to_benchmarks():
    """Both spellings print the same help and refuse the same unknown subcommand with exit status 2."""
    ours, theirs = run(["paged", "bench", "--help"], ROOT), run(["benchmarks", "--help"], ROOT)
    assert ours.returncode == theirs.returncode == 0 and "python -m benchmarks" in ours.stdout
    assert ours.stdout == theirs.stdout
    bad = run(["paged", "bench", "nope"], ROOT)
    assert bad.returncode == 2 and "unknown bench subcommand 'nope'" in bad.stderr


def test_paged_bench_without_the_benchmarks_folder(tmp_path):
    """Where only paged/ is importable, `python -m paged bench` says where the benchmarks went, exit status 2."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "paged").symlink_to(ROOT / "paged", target_is_directory=True)
    proc = run(["paged", "bench", "memory"], tmp_path, pythonpath=tmp_path / "lib")
    assert proc.returncode == 2 and "python -m benchmarks" in proc.stderr and "Traceback" not in proc.stderr
