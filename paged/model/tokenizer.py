"""Tokenizers: the byte-level one the shipped model uses, and a thin wrapper for a `tokenizers` tokenizer.json.

Byte level means ids 0-255 are the UTF-8 bytes of the text, so any text round-trips with no vocabulary file.
A Chinese character is three bytes, hence three tokens: when streaming, a decoder must hold back the first two
until the third arrives, or it prints replacement characters mid-character. `IncrementalDecoder` does that.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Iterable

BOS = 256  # beginning of sequence
EOS = 257  # end of sequence: generation stops here
SEP = 258  # separates the text to recall from its copy in the recall task
BYTE_VOCAB_SIZE = 259


class IncrementalDecoder:
    """Turns a stream of token ids into text pieces that never split a UTF-8 character.

    `push(token_id)` returns the text that became complete with this token (possibly ""). Special ids
    (>= 256) are skipped. `flush()` returns whatever is still pending (as U+FFFD if it is an incomplete char).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        if not 0 <= token_id < 256:
            return ""
        return self._decoder.decode(bytes([token_id]))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255, plus BOS 256, EOS 257, SEP 258."""

    vocab_size = BYTE_VOCAB_SIZE
    bos_token_id = BOS
    eos_token_id = EOS
    sep_token_id = SEP

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """text -> [BOS] + its UTF-8 bytes (BOS only if add_bos)."""
        ids = list(text.encode("utf-8"))
        return [BOS] + ids if add_bos else ids

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The raw bytes of `ids`, special ids skipped (may end mid-character)."""
        return bytes(i for i in ids if 0 <= i < 256)

    def decode(self, ids: Iterable[int]) -> str:
        """ids -> text; special ids skipped, invalid UTF-8 shown as U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def incremental_decoder(self) -> IncrementalDecoder:
        """A fresh streaming decoder (see IncrementalDecoder)."""
        return IncrementalDecoder()

    def save(self, path: str | Path) -> None:
        """Nothing to write: the byte tokenizer is what load_model falls back to when a dir has no tokenizer."""


class _PrefixDiffDecoder:
    """Streaming decoder for a subword tokenizer: decode the whole prefix, emit only the new stable suffix.

    A trailing U+FFFD usually means a byte-fallback token split a character, so it is held back until more
    tokens arrive (or flush).
    """

    def __init__(self, tokenizer: "HFTokenizer") -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._emitted = 0

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        text = self._tokenizer.decode(self._ids)
        if text.endswith("\ufffd"):
            return ""
        piece, self._emitted = text[self._emitted:], len(text)
        return piece

    def flush(self) -> str:
        text = self._tokenizer.decode(self._ids)
        piece, self._emitted = text[self._emitted:], len(text)
        return piece


class HFTokenizer:
    """Wraps a `tokenizers.Tokenizer` (from tokenizer.json) behind the ByteTokenizer interface."""

    sep_token_id = None

    def __init__(self, tokenizer, bos_token_id: int | None, eos_token_id: int | None) -> None:
        self._tokenizer = tokenizer
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_file(cls, path: str | Path, bos_token_id: int | None, eos_token_id: int | None) -> "HFTokenizer":
        from tokenizers import Tokenizer  # optional dependency: only imported when a tokenizer.json exists

        return cls(Tokenizer.from_file(str(path)), bos_token_id, eos_token_id)

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id] + ids if add_bos and self.bos_token_id is not None else ids

    def decode(self, ids: Iterable[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)

    def incremental_decoder(self) -> _PrefixDiffDecoder:
        return _PrefixDiffDecoder(self)

    def save(self, path: str | Path) -> None:
        """Writes tokenizer.json into the directory `path`."""
        self._tokenizer.save(str(Path(path) / "tokenizer.json"))
