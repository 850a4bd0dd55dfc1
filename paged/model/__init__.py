"""Tiny Llama in plain torch, byte tokenizer, HF-style save/load. See llama.py for the backend interface."""

from paged.model.io import load_model, save_model
from paged.model.llama import TinyLlama
from paged.model.tokenizer import BOS, EOS, SEP, ByteTokenizer

__all__ = ["TinyLlama", "ByteTokenizer", "load_model", "save_model", "BOS", "EOS", "SEP"]
