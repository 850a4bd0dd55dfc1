"""Fixtures of the app tests (helpers live in app_util.py)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from .app_util import APP, PAGES_DIR, ROOT, TIMEOUT, app_test, page_files  # noqa: F401  (old imports keep working)


def skip_or_fail(reason: str) -> None:
    """Skip for a missing browser, unless PAGED_REQUIRE_BROWSER=1 (CI) makes it a failure."""
    if os.environ.get("PAGED_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PAGED_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """One headless Debian chromium (playwright) per test module."""
    from ui.bench.chromium import BrowserUnavailable, chromium

    try:
        with chromium() as b:
            yield b
    except BrowserUnavailable as err:
        skip_or_fail(str(err))


@pytest.fixture(scope="module")
def server():
    """`streamlit run app.py` on a free port, for the module: its base URL. A module that needs
    another server (a log file, its own port) defines its own `server`, which takes precedence."""
    from ui.bench.chromium import app_server

    try:
        with app_server() as srv:
            yield srv.base
    except RuntimeError as err:
        pytest.fail(str(err))


AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # npm ci (package.json pins axe-core)


@pytest.fixture(scope="module")
def axe_source() -> str:
    """axe-core's browser bundle (node_modules, `npm ci`): skipped when missing, a failure with
    PAGED_REQUIRE_BROWSER=1."""
    if not AXE.exists():
        skip_or_fail(f"axe-core is not installed at {AXE} (run `npm ci` in the repository root)")
    return AXE.read_text(encoding="utf-8")


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The pages set torch to one thread (ui.page.configure_torch); give the rest of the test session its
    setting back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session", autouse=True)
def _import_vllm_once():
    """With vLLM installed, pages 4 and 6 drive its KVCacheManager: import it once here (seconds), outside any
    page run's AppTest timeout."""
    if importlib.util.find_spec("vllm") is not None:
        importlib.import_module("vllm.v1.core.kv_cache_manager")
        importlib.import_module("vllm.v1.request")


def _hf_tiny():
    spec = importlib.util.spec_from_file_location("hf_tiny", Path(__file__).parents[1] / "paged" / "hf_tiny.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny random LlamaForCausalLM (2 layers, hidden 64, byte-level BPE of 300 tokens) saved by transformers."""
    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    _hf_tiny().build_checkpoint(path, "llama")
    return path.resolve()


@pytest.fixture
def allowed(checkpoint, monkeypatch) -> Path:
    monkeypatch.setenv("PAGED_MODEL_DIRS", str(checkpoint))
    monkeypatch.delenv("PAGED_MODEL_DIR", raising=False)
    return checkpoint
