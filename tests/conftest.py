"""Shared fixtures (seeded rng, the shipped model, figure validation) and the CI rule that a skip is a failure.
Helper functions live in tests/helpers.py."""

from __future__ import annotations

import os
import random

import pytest
import torch

torch.set_num_threads(1)  # tiny test tensors: a second thread only adds sync overhead


@pytest.fixture
def rng() -> random.Random:
    return random.Random(1234)


@pytest.fixture(scope="module")
def shipped():
    """The shipped model and its tokenizer (paged/model/weights), loaded once per test module."""
    from paged.model import load_model

    return load_model()


@pytest.fixture
def validate_figures(monkeypatch):
    """Build figures with plotly's validation on (off in the app, for speed): an invalid property fails the test."""
    monkeypatch.setenv("PAGED_VALIDATE_FIGURES", "1")


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test gets the environment it started with: vLLM's platform setup (building a VllmConfig) writes
    LD_PRELOAD and VLLM_* variables into os.environ, which would leak into every later test's subprocesses (an
    AddressSanitizer build refuses to start under a foreign LD_PRELOAD)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CI=true) every dependency is installed, so a skipped test means something is missing: fail it."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI", "").lower() == "true":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where nothing may be skipped: {reason}"
