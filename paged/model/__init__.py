"""Llama (and Qwen2 / Qwen3) decoder in plain torch, byte tokenizer, HF-style save/load.

See llama.py for the backend interface, io.py for loading a local Hugging Face checkpoint.
"""

from paged.model.io import allowed_model_dirs, load_model, save_model
from paged.model.llama import TinyLlama
from paged.model.tokenizer import BOS, EOS, SEP, ByteTokenizer

__all__ = ["TinyLlama", "ByteTokenizer", "load_model", "save_model", "allowed_model_dirs",
           "BOS", "EOS", "SEP"]
