"""Fixtures of the app tests (helpers live in app_util.py)."""

from __future__ import annotations

import pytest
import torch

from .app_util import APP, PAGES_DIR, ROOT, TIMEOUT, app_test, page_files  # noqa: F401  (old imports keep working)


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The pages set torch to one thread (ui.page.configure_torch); give the rest of the test session its
    setting back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
