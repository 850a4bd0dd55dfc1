"""Shared test helpers: seeded random pools and an independent contiguous reference."""

from __future__ import annotations

import os
import random

import pytest
import torch

torch.set_num_threads(1)  # tiny test tensors: a second thread only adds sync overhead


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref|, computed in float64."""
    out, ref = out.double(), ref.double()
    return ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


def naive_decode(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None):
    """An independent float64 decode attention for one sequence: explicit loops over heads, no shared code.

    query [num_heads, head_dim]; keys/values [context_len, num_kv_heads, head_dim] -> [num_heads, head_dim]
    """
    num_heads, head_dim = query.shape
    group = num_heads // keys.shape[1]
    scale = head_dim ** -0.5 if scale is None else scale
    out = torch.empty(num_heads, head_dim, dtype=torch.float64)
    for h in range(num_heads):
        k = keys[:, h // group].double()
        s = (k @ query[h].double()) * scale
        w = torch.exp(s - s.max())
        out[h] = (w / w.sum()) @ values[:, h // group].double()
    return out


def scattered_tables(rng: random.Random, num_blocks: int, lens: list[int], block_size: int) -> list[list[int]]:
    """Disjoint, shuffled block tables with exactly enough blocks for each context length."""
    ids = list(range(num_blocks))
    rng.shuffle(ids)
    tables, at = [], 0
    for n in lens:
        need = -(-n // block_size)
        tables.append(ids[at:at + need])
        at += need
    assert at <= num_blocks, "pool too small for the requested lengths"
    return tables


@pytest.fixture
def rng() -> random.Random:
    return random.Random(1234)


@pytest.fixture
def validate_figures(monkeypatch):
    """Build figures with plotly's validation on (off in the app, for speed): an invalid property fails the test."""
    monkeypatch.setenv("PAGED_VALIDATE_FIGURES", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CI=true) every dependency is installed, so a skipped test means something is missing: fail it."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI", "").lower() == "true":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may be skipped: {reason}"
