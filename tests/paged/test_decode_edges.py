"""Every decode impl gives the same answer (or the same error) on the inputs that used to split them.

- a permuted (non-contiguous) query, non-contiguous caches, tables and lengths;
- a short sequence whose table holds an out-of-pool id past its context while a longer one shares the batch
  (entries past a sequence's context must never be read);
- an empty batch: an empty [0, num_heads, head_dim] result from every impl.
Triton runs under its CPU interpreter in one subprocess (TRITON_INTERPRET=1 must be set before it is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import paged.kernels  # noqa: F401  (registers "fused", "native", "triton")
from helpers import rel_err
from paged.addressing import slot_mapping
from paged.attention import DECODE_IMPLS, contiguous_attention_decode, paged_attention_decode
from paged.kernels import triton_available
from paged.kv_cache import write_kv

pytestmark = pytest.mark.article

REPO = Path(__file__).resolve().parents[2]
IMPLS = list(DECODE_IMPLS)
CASES = ["noncontiguous", "stale_entries", "empty_batch"]


def noncontiguous(impl: str) -> str | None:
    """A permuted query, caches stored kv-head-major (strided views), a transposed table tensor and strided lengths
    give the contiguous reference's answer."""
    gen = torch.Generator().manual_seed(5)
    lens, block_size, num_kv_heads, head_dim = [10, 6, 1], 4, 2, 8
    storage = torch.randn(2, 7, num_kv_heads, block_size, head_dim, generator=gen)
    key_cache, value_cache = storage[0].transpose(1, 2), storage[1].transpose(1, 2)  # [7, 4, 2, 8], strided
    tables = [[5, 2, 0], [4, 1], [6]]
    keys = torch.zeros(3, max(lens), num_kv_heads, head_dim)
    values = torch.zeros_like(keys)
    for b, n in enumerate(lens):
        k, v = torch.randn(2, n, num_kv_heads, head_dim, generator=gen)
        keys[b, :n], values[b, :n] = k, v
        write_kv(key_cache, value_cache, k, v, slot_mapping(tables[b], 0, n, block_size))
    query = torch.randn(4, 3, head_dim, generator=gen).transpose(0, 1)  # [3, 4, 8], not contiguous
    padded = torch.tensor([[5, 4, 6], [2, 1, -1], [0, -1, -1]], dtype=torch.int32).t()  # [3, 3], strided
    lens_t = torch.tensor([10, 0, 6, 0, 1, 0])[::2]
    assert not (query.is_contiguous() or key_cache.is_contiguous() or padded.is_contiguous())
    ref = contiguous_attention_decode(query.double(), keys.double(), values.double(), lens)
    for validate in (True, False):
        out = paged_attention_decode(query, key_cache, value_cache, padded, lens_t, impl=impl, validate=validate)
        if out.shape != query.shape or not rel_err(out, ref) < 1e-5:
            return f"validate={validate}: shape {tuple(out.shape)}, rel err {rel_err(out, ref):.2e}"
    return None


def stale_entries(impl: str) -> str | None:
    """2 blocks of 1 slot; tables [[0, 1], [1, 5]], lens [2, 1]: sequence 1 reads only block 1, never entry 5."""
    gen = torch.Generator().manual_seed(7)
    key_cache, value_cache = torch.randn(2, 2, 1, 1, 4, generator=gen)
    query = torch.randn(2, 2, 4, generator=gen)
    keys = torch.stack([key_cache[:, 0], torch.cat([key_cache[1:, 0], torch.full((1, 1, 4), float("nan"))])])
    values = torch.stack([value_cache[:, 0], torch.cat([value_cache[1:, 0], torch.full((1, 1, 4), float("nan"))])])
    ref = contiguous_attention_decode(query.double(), keys.double(), values.double(), [2, 1])
    for validate in (True, False):
        out = paged_attention_decode(query, key_cache, value_cache, [[0, 1], [1, 5]], [2, 1], impl=impl,
                                     validate=validate)
        if not rel_err(out, ref) < 1e-5:
            return f"validate={validate}: rel err {rel_err(out, ref):.2e}"
    return None


def empty_batch(impl: str) -> str | None:
    """B = 0 gives an empty [0, num_heads, head_dim] result in the query's dtype."""
    key_cache = torch.randn(3, 4, 2, 8)
    for validate in (True, False):
        for dtype in (torch.float32, torch.bfloat16):
            query = torch.randn(0, 4, 8).to(dtype)
            out = paged_attention_decode(query, key_cache.to(dtype), key_cache.to(dtype), [], [], impl=impl,
                                         validate=validate)
            if out.shape != (0, 4, 8) or out.dtype != dtype:
                return f"validate={validate} {dtype}: got {tuple(out.shape)} {out.dtype}"
    return None


def run_case(case: str, impl: str) -> str:
    """'ok', or what went wrong (a wrong answer or any exception)."""
    try:
        problem = globals()[case](impl)
    except Exception as err:  # noqa: BLE001  (any exception is the finding)
        return f"{type(err).__name__}: {err}"
    return problem or "ok"


TRITON_SCRIPT = """
import json, sys
sys.path[:0] = [{repo!r}, {tests!r}, {tests!r} + "/paged"]
import torch
torch.set_num_threads(1)
from test_decode_edges import CASES, run_case
print(json.dumps({{case: run_case(case, "triton") for case in CASES}}))
"""


@pytest.fixture(scope="module")
def triton_results() -> dict[str, str]:
    """The three cases for impl='triton', run once in an interpreted subprocess."""
    if not triton_available():
        pytest.skip("triton is not installed")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    code = TRITON_SCRIPT.format(repo=str(REPO), tests=str(REPO / "tests"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", CASES)
def test_every_impl_agrees(case, impl, request):
    """Each impl returns the contiguous reference's answer (or an empty batch) on each edge case."""
    result = request.getfixturevalue("triton_results")[case] if impl == "triton" else run_case(case, impl)
    assert result == "ok", f"impl={impl} case={case}: {result}"
