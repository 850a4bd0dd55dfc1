"""The real vLLM in tests: skip without it, except where it must be there (PAGED_REQUIRE_VLLM=1, set by CI, which
installs requirements-vllm.txt): there a missing vLLM fails the test instead."""

from __future__ import annotations

import os

import pytest

from paged.chapters.vllm_twin import INSTALL_HINT, vllm_available


def need_vllm() -> None:
    """Skip (or, with PAGED_REQUIRE_VLLM=1, fail) the calling test when vLLM is not importable."""
    if vllm_available():
        return
    reason = f"vLLM is not installed ({INSTALL_HINT})"
    if os.environ.get("PAGED_REQUIRE_VLLM") == "1":
        pytest.fail(f"PAGED_REQUIRE_VLLM=1 but {reason}")
    pytest.skip(reason)
