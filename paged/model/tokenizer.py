"""Tokenizers: the shipped model's byte-level one, and a thin wrapper for a tokenizer.json.

Byte level means ids 0-255 are the UTF-8 bytes of the text, so any text round-trips with no
vocabulary file. A Chinese character is three bytes, hence three tokens: when streaming, a decoder
must hold back the first two until the third arrives, or it prints replacement characters
mid-character. `IncrementalDecoder` does that.
"""

from __future__ import annotations

import codecs
import warnings
from pathlib import Path
from typing import Iterable

BOS = 256  # beginning of sequence
EOS = 257  # end of sequence: generation stops here
SEP = 258  # separates the text to recall from its copy in the recall task
BYTE_VOCAB_SIZE = 259


class IncrementalDecoder:
    """Turns a stream of token ids into text pieces that never split a UTF-8 character.

    `push(token_id)` returns the text completed by this token (possibly ""); special ids (>= 256)
    are skipped. `flush()` returns whatever is pending (U+FFFD for an incomplete character).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """The text this byte id completes ("" for a special id or a partial character)."""
        if not 0 <= token_id < 256:
            return ""
        return self._decoder.decode(bytes([token_id]))

    def flush(self) -> str:
        """Whatever is still pending, an incomplete character as U+FFFD."""
        return self._decoder.decode(b"", final=True)


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255, plus BOS 256, EOS 257, SEP 258."""

    vocab_size = BYTE_VOCAB_SIZE
    bos_token_id = BOS
    eos_token_id = EOS
    eos_token_ids = (EOS,)  # every id that ends generation (HF models may have several)
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
        """Nothing to write: load_model falls back to the byte tokenizer when a dir has none."""


class _PrefixDiffDecoder:
    """Streaming decoder for a subword tokenizer: decode the prefix, emit the new stable suffix.

    A trailing U+FFFD usually means a byte-fallback token split a character, so it is held back
    until more tokens arrive (or flush).
    """

    def __init__(self, tokenizer: "HFTokenizer") -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._emitted = 0

    def push(self, token_id: int) -> str:
        """The new text this token adds ("" while the text ends in a split character)."""
        self._ids.append(token_id)
        text = self._tokenizer.decode(self._ids)
        if text.endswith("\ufffd"):
            return ""
        piece, self._emitted = text[self._emitted:], len(text)
        return piece

    def flush(self) -> str:
        """Whatever has not been emitted yet."""
        text = self._tokenizer.decode(self._ids)
        piece, self._emitted = text[self._emitted:], len(text)
        return piece


class HFTokenizer:
    """Wraps a `tokenizers.Tokenizer` (from tokenizer.json) behind the ByteTokenizer interface.

    add_bos_token: whether encode(add_bos=True) prepends bos_token_id (Llama does; Qwen has no BOS).
    eos_token_ids: every id that ends generation, eos_token_id first (generation_config.json may
    list several, e.g. Llama 3 Instruct's <|end_of_text|> and <|eot_id|>); () when there is none.
    """

    sep_token_id = None

    def __init__(self, tokenizer, bos_token_id: int | None, eos_token_id: int | None,
                 add_bos_token: bool = True, eos_token_ids: Iterable[int] = ()) -> None:
        self._tokenizer = tokenizer
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.eos_token_ids = tuple(dict.fromkeys(
            ([eos_token_id] if eos_token_id is not None else []) + list(eos_token_ids)))
        self.add_bos_token = add_bos_token and bos_token_id is not None
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._special_ids = frozenset(i for i, t in tokenizer.get_added_tokens_decoder().items()
                                      if t.special)
        # byte-level BPE (GPT-2, Llama 3, Qwen) writes each byte as one printable stand-in
        # character ("Ġ" = space)
        self.byte_level = type(tokenizer.decoder).__name__ == "ByteLevel"

    @classmethod
    def from_file(cls, path: str | Path, bos_token_id: int | None, eos_token_id: int | None,
                  add_bos_token: bool = True) -> "HFTokenizer":
        """Read a tokenizer.json.

        Raises: ValueError naming the file if the tokenizers library cannot parse it.
        """
        # optional dependency: only imported when a tokenizer.json exists
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(path))
        # the Rust parser raises a bare Exception for bad JSON, too deep nesting, ...
        except Exception as e:
            raise ValueError(f"{path}: not a tokenizer the tokenizers library can read "
                             f"({e})") from e
        return cls(tokenizer, bos_token_id, eos_token_id, add_bos_token)

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string (None if it is not in the vocabulary)."""
        return self._tokenizer.token_to_id(token)

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """text -> ids, bos_token_id first if add_bos and the tokenizer uses one (add_bos_token)."""
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id] + ids if add_bos and self.add_bos_token else ids

    def id_to_token(self, token_id: int) -> str | None:
        """The vocabulary string of one id (e.g. "Ġthe", "<0x0A>", "</s>"); None if not in it."""
        return self._tokenizer.id_to_token(int(token_id))

    def is_special(self, token_id: int) -> bool:
        """Whether `token_id` is a special added token (decode skips it, e.g. "<|endoftext|>")."""
        return int(token_id) in self._special_ids

    def decode(self, ids: Iterable[int]) -> str:
        """ids -> text, special tokens skipped."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)

    def incremental_decoder(self) -> _PrefixDiffDecoder:
        """A fresh streaming decoder (see _PrefixDiffDecoder)."""
        return _PrefixDiffDecoder(self)

    def save(self, path: str | Path) -> None:
        """Writes tokenizer.json into the directory `path`."""
        self._tokenizer.save(str(Path(path) / "tokenizer.json"))


def _token_id(tokenizer: HFTokenizer, token: object) -> int | None:
    """A tokenizer_config.json special token ("<s>" or {"content": "<s>", ...}) -> id, or None."""
    if isinstance(token, dict):
        token = token.get("content")
    return tokenizer.token_to_id(token) if isinstance(token, str) else None


def _is_id(value: object) -> bool:
    """Whether `value` is a token id: an int >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _first_int(value: object) -> int | None:
    """An id from generation_config.json / config.json: an int, or a list's first (else None)."""
    value = value[0] if isinstance(value, list) and value else value
    return value if _is_id(value) else None


def _all_ints(value: object) -> list[int]:
    """Every id of an int or a list of ints (generation_config.json's eos_token_id may be either).

    Anything that is not an id is dropped.
    """
    return [v for v in (value if isinstance(value, list) else [value]) if _is_id(v)]


MAX_TOKENIZER_BYTES = 64 * 2**20  # Llama 3's tokenizer.json is ~9 MB, Gemma's ~34 MB


def load_hf_tokenizer(directory: Path, config) -> HFTokenizer | None:
    """The tokenizer of an HF model directory, or None when it has no tokenizer.json.

    bos / eos ids: generation_config.json first (what transformers' generate uses), then
    config.json, then tokenizer_config.json's bos_token / eos_token. Prepend BOS as
    tokenizer_config.json's add_bos_token says; else as tokenizer.json's own post-processor does
    (Llama 3 adds <|begin_of_text|>, Qwen nothing); without tokenizer_config.json: whenever any.
    Raises: ValueError naming the file for malformed JSON, a file outside the directory, a
    tokenizer.json over MAX_TOKENIZER_BYTES, or more tokens than the model's embedding table.
    """
    # here: checkpoint has no reason to know tokenizers
    from paged.model.checkpoint import inside, read_json

    if not (directory / "tokenizer.json").is_file():
        return None
    path = inside(directory, "tokenizer.json")
    # checked before the parser sees (and allocates for) it
    if path.stat().st_size > MAX_TOKENIZER_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size:,} bytes, more than the "
                         f"{MAX_TOKENIZER_BYTES:,} a tokenizer.json may hold here (real ones are "
                         "under 40 MB)")
    extra = {name: read_json(inside(directory, name)) if (directory / name).is_file() else None
             for name in ("generation_config.json", "tokenizer_config.json")}
    generation, tok_config = extra["generation_config.json"] or {}, extra["tokenizer_config.json"]
    try:
        tokenizer = HFTokenizer.from_file(path, None, None)
    except ImportError:
        warnings.warn(f"{path} found but the `tokenizers` package is not installed; falling back "
                      "to the byte tokenizer", stacklevel=3)
        return None
    ids = {}
    for kind in ("bos", "eos"):
        ids[kind] = _first_int(generation.get(f"{kind}_token_id"))
        if ids[kind] is None:
            ids[kind] = getattr(config, f"{kind}_token_id")
        if ids[kind] is None and tok_config is not None:
            ids[kind] = _token_id(tokenizer, tok_config.get(f"{kind}_token"))
    if tok_config is not None and isinstance(tok_config.get("add_bos_token"), bool):
        add_bos = tok_config["add_bos_token"]
    elif tok_config is not None:
        with_specials = tokenizer._tokenizer.encode("a", add_special_tokens=True).ids
        add_bos = bool(with_specials) and with_specials[0] == ids["bos"]
    else:
        add_bos = True
    tokenizer.bos_token_id, tokenizer.eos_token_id = ids["bos"], ids["eos"]
    # generation stops on any of generation_config.json's eos ids (what transformers' generate does)
    tokenizer.eos_token_ids = tuple(dict.fromkeys(
        ([ids["eos"]] if ids["eos"] is not None else [])
        + _all_ints(generation.get("eos_token_id"))))
    tokenizer.add_bos_token = add_bos and ids["bos"] is not None
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"{path}: the tokenizer has {tokenizer.vocab_size} tokens but the "
                         f"model's vocab_size is {config.vocab_size}; some ids would have no "
                         "embedding")
    return tokenizer
