"""Fixtures the lesson tests share."""

import pytest
import torch

from paged.config import ModelConfig
from paged.model import ByteTokenizer, TinyLlama


@pytest.fixture(scope="module")
def tiny():
    """A small random one-layer model (256 positions): fast, and every step's inputs are real. One torch thread, as
    the app runs. A test module that needs another size defines its own `tiny`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256)
    yield TinyLlama(cfg).eval(), ByteTokenizer()
    torch.set_num_threads(threads)
