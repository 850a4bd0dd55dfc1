"""Fixtures the lesson tests share."""

import pytest
import torch

from helpers import tiny_model


@pytest.fixture(scope="module")
def tiny():
    """A small random one-layer model (256 positions): fast, and every step's inputs are real. One torch thread, as
    the app runs. A test module that needs another size defines its own `tiny`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_model(hidden_size=32, num_hidden_layers=1)
    torch.set_num_threads(threads)
