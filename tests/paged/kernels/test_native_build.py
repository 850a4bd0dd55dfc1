"""The C kernel's build cache never runs foreign or broken code, and a bad compiler never wedges the caller.

Each test gets an empty cache folder and a native module that has loaded nothing yet; builds use -O1 (faster to
compile; the kernel's numbers are covered by test_native.py). A loaded library stays loaded for the process, so
every case builds under a path of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from helpers import rel_err
from paged.attention import contiguous_attention_decode, paged_attention_decode
from paged.kernels import native, native_build
from decode_cases import build

pytestmark = pytest.mark.kernels

REPO = Path(__file__).resolve().parents[3]
QUICK_FLAGS = (("-O1", "-pthread", "-shared", "-fPIC"),)


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """An empty private cache folder, a native module with nothing loaded, quick builds; returns the folder."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(native_build, "_private_tmp", [])
    monkeypatch.setattr(native_build, "FLAG_SETS", QUICK_FLAGS)
    monkeypatch.setenv("PAGED_CACHE_DIR", str(folder))
    monkeypatch.delenv("CC", raising=False)
    return folder


def gcc() -> str:
    path = shutil.which("gcc") or shutil.which("cc")
    assert path, "a C compiler is needed (apt-get install gcc)"
    return path


def shared_library(tmp_path: Path, name: str, code: str) -> Path:
    """Compile `code` into tmp_path/name.so."""
    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(code)
    subprocess.run([gcc(), "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    return lib


def planted_library(tmp_path: Path, marker: Path) -> Path:
    """A library that would take the process over: its constructor writes `marker`, its paged_decode lies."""
    return shared_library(tmp_path, "planted", textwrap.dedent(f"""
        #include <stdio.h>
        #include <stdint.h>
        __attribute__((constructor)) static void takeover(void) {{
            FILE *f = fopen("{marker}", "w");
            if (f) {{ fputs("foreign code ran", f); fclose(f); }}
        }}
        int64_t paged_decode_packed(void) {{ return 0; }}
    """))


def expected_library() -> Path:
    """Where the cache looks for the library of the first (only) flag set."""
    return native_build.library_path(native_build.compiler(), native_build.FLAG_SETS[0])


def write_digest(library: Path, of: Path) -> None:
    """Write the digest file next to `library` as the builder would, for the bytes of `of`."""
    (library.parent / (library.name + ".sha256")).write_text(native_build._sha256(of) + "\n")


def assert_kernel_works() -> None:
    """impl='native' is available and matches the contiguous reference."""
    assert native.native_error() is None
    lens = [3, 17]
    query, kc, vc, tables, keys, values = build(4, 2, 16, 4, lens, torch.float32)
    out = paged_attention_decode(query, kc, vc, tables, lens, impl="native")
    assert rel_err(out, contiguous_attention_decode(query.double(), keys, values, lens)) < 1e-5


@pytest.mark.parametrize("digest", ["none", "wrong"])
def test_planted_library_is_never_loaded(cache, tmp_path, digest):
    """A library put where the cache looks, with no digest or a wrong one, is rebuilt: its constructor never runs."""
    marker = tmp_path / "marker"
    target = expected_library()
    shutil.copy(planted_library(tmp_path, marker), target)
    if digest == "wrong":
        (target.parent / (target.name + ".sha256")).write_text("0" * 64 + "\n")
    assert_kernel_works()
    assert not marker.exists(), "the planted library's constructor ran"
    assert native_build.verified(target)


@pytest.mark.parametrize("problem", ["group-writable", "world-writable", "foreign owner"])
def test_unsafe_cache_folder_is_refused(cache, tmp_path, monkeypatch, problem):
    """A cache folder others could write to (or someone else's) is not used even for a matching library and digest:
    the build goes to a fresh private temp folder instead."""
    marker = tmp_path / "marker"
    target = expected_library()
    shutil.copy(planted_library(tmp_path, marker), target)
    write_digest(target, target)
    if problem == "foreign owner":
        real = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    else:
        cache.chmod(0o770 if problem == "group-writable" else 0o777)
    assert native_build._private_folder_problem(cache) is not None
    assert_kernel_works()
    assert not marker.exists(), "a library from an unsafe folder was loaded"
    private = native_build.cache_dir()
    assert private != cache and (private.stat().st_mode & 0o777) == 0o700
    assert list(private.glob("native_decode-*.so"))


def test_created_cache_folder_is_private(cache, monkeypatch):
    """A cache folder that does not exist yet is created 0700 and used."""
    fresh = cache / "deeper" / "paged"
    monkeypatch.setenv("PAGED_CACHE_DIR", str(fresh))
    assert native_build.cache_dir() == fresh and (fresh.stat().st_mode & 0o777) == 0o700


TRUNCATED = """
import sys
sys.path[:0] = [{repo!r}, {tests!r}, {tests!r} + "/paged", {tests!r} + "/paged/kernels"]
import torch
from paged.kernels import native, native_build
native_build.FLAG_SETS = {flags!r}
from test_native_build import assert_kernel_works
assert_kernel_works()
print("ok")
"""


def run_fresh_process(cache: Path) -> subprocess.CompletedProcess:
    code = TRUNCATED.format(repo=str(REPO), tests=str(REPO / "tests"), flags=QUICK_FLAGS)
    env = {**os.environ, "PAGED_CACHE_DIR": str(cache)}
    env.pop("CC", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_truncated_library_is_rebuilt_not_fatal(cache):
    """A library cut short (as by a full disk) would kill the process with SIGBUS when mapped. It fails the digest
    check instead, is rebuilt, and the kernel works (run in fresh processes, so a crash cannot take pytest down)."""
    first = run_fresh_process(cache)
    assert first.returncode == 0, first.stderr[-2000:]
    (library,) = cache.glob("native_decode-*.so")
    data = library.read_bytes()
    library.write_bytes(data[: len(data) // 2])
    second = run_fresh_process(cache)
    assert second.returncode == 0, f"exit {second.returncode}: {second.stderr[-2000:]}"
    assert library.read_bytes() != data[: len(data) // 2] and native_build.verified(library)


@pytest.mark.parametrize("digest", ["stale", "matching"])
def test_garbage_library_is_rebuilt(cache, digest):
    """Garbage where the library should be is rebuilt, whether its digest is stale (caught before dlopen) or
    matches (dlopen fails, the file is deleted and built again): the kernel works, no fallback is left behind."""
    target = expected_library()
    target.write_bytes(os.urandom(4096))
    if digest == "matching":
        write_digest(target, target)
    else:
        (target.parent / (target.name + ".sha256")).write_text("1" * 64 + "\n")
    assert_kernel_works()
    assert native_build.verified(target)


def test_library_without_the_symbol_is_rebuilt(cache, tmp_path):
    """A verified library that lacks paged_decode_packed is unloaded, deleted and rebuilt (no AttributeError)."""
    target = expected_library()
    shutil.copy(shared_library(tmp_path, "empty", "int something_else(void) { return 1; }\n"), target)
    write_digest(target, target)
    assert_kernel_works()


def test_build_without_the_symbol_is_a_clear_error(cache, tmp_path, monkeypatch):
    """When even a fresh build lacks paged_decode_packed, native is unavailable with a RuntimeError naming it."""
    source = tmp_path / "wrong.c"
    source.write_text("int something_else(void) { return 1; }\n")
    monkeypatch.setattr(native_build, "SOURCE", source)
    problem = native.native_error()
    assert problem is not None and f"no function {native_build.SYMBOL!r}" in problem
    query, kc, vc, tables, _, _ = build(4, 2, 16, 4, [5], torch.float32)
    with pytest.raises(RuntimeError, match="paged_decode"):
        paged_attention_decode(query, kc, vc, tables, [5], impl="native")


@pytest.mark.parametrize("hangs_on", ["--version", "compile"])
def test_hanging_compiler_times_out(cache, tmp_path, monkeypatch, hangs_on):
    """A compiler that never finishes is killed (with what it started) after COMPILE_TIMEOUT_S; native is then
    unavailable with a clear message and the engine's default falls back to 'gather'."""
    from paged.kernels import default_attn_impl

    pid_file = tmp_path / "sleeper.pid"
    fake = tmp_path / "fake-cc"
    quick_version = 'if [ "$1" = "--version" ]; then echo "fake cc 1.0"; exit 0; fi\n' if hangs_on == "compile" else ""
    fake.write_text(f"#!/bin/sh\n{quick_version}sleep 60 &\necho $! > {pid_file}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setattr(native_build, "COMPILE_TIMEOUT_S", 1.0)
    start = time.monotonic()
    problem = native.native_error()
    assert time.monotonic() - start < 15
    assert problem is not None and "did not finish within 1 s" in problem
    assert default_attn_impl(torch.device("cpu")) == "gather"
    sleeper = int(pid_file.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{sleeper}").exists() or "Z" in Path(f"/proc/{sleeper}/stat").read_text().split()[2], \
        "the compiler's child is still running"


def test_cc_with_flags_is_split_like_a_shell(cache, monkeypatch):
    """CC="gcc -O2" is the program gcc with the flag -O2, not a program named "gcc -O2"."""
    monkeypatch.setenv("CC", f"{gcc()} -O2")
    assert native_build.compiler() == [gcc(), "-O2"]
    assert_kernel_works()


@pytest.mark.parametrize("cc, msg", [("gcc '-O2", "cannot be split"), ("no-such-compiler-here -O2", "not an "
                                                                                                    "executable")])
def test_unusable_cc_is_a_clear_error(cache, monkeypatch, cc, msg):
    """A $CC with unbalanced quotes or naming no program says so, instead of 'needs a C compiler'."""
    monkeypatch.setenv("CC", cc)
    problem = native.native_error()
    assert problem is not None and msg in problem and "$CC" in problem
