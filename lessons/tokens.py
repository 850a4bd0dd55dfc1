"""How the pages show token ids as text: special tokens spelled out (⟨BOS⟩, ⟨SEP⟩, ⟨EOS⟩), and bytes that are not
valid UTF-8 (or are invisible control characters) shown as ⟨0xE6⟩, never as "�" or nothing.

The byte tokenizer of the shipped model maps one token to one byte, so a sampled token can be half of a Chinese
character or a byte no text contains; `decode` turns each such byte into U+FFFD and the reader loses which byte it
was. `token_pieces` keeps it. Pages build their markup from the pieces (escape each piece's text, then wrap it),
so no transformation ever runs over markup.

A subword tokenizer (a local Hugging Face model's tokenizer.json) has tokens that are several characters, a single
space-prefixed word, or one raw byte (SentencePiece's byte fallback "<0xE4>", or a byte-level BPE token holding
half a character). `token_label` shows one token as a cell can: its bytes, spaces and newlines made visible (␣ ↵),
invalid bytes as ⟨0xNN⟩, special tokens by name, long pieces cut with "…".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

TEXT, SPECIAL, BYTE, UNKNOWN = "text", "special", "byte", "unknown"
SPECIAL_NAMES = (("bos_token_id", "BOS"), ("sep_token_id", "SEP"), ("eos_token_id", "EOS"))


@dataclass(frozen=True)
class Piece:
    """A run of token ids as shown: decoded text (kind "text"), a special token ("⟨EOS⟩", kind "special"), one
    byte that is not valid UTF-8 at its place ("⟨0xE6⟩", kind "byte") or an id the tokenizer's vocabulary does not
    have ("⟨#302⟩", kind "unknown": a model's embedding often has more rows than its tokenizer has tokens)."""

    text: str
    kind: str = TEXT


def _byte_value(ch: str) -> int | None:
    """The byte a decoded character stands for when it must be shown as ⟨0xNN⟩: an invalid byte (surrogateescape
    maps byte 0x80..0xFF to U+DC80..U+DCFF) or a control character other than newline and tab; else None."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        return code - 0xDC00
    if (code < 0x20 and ch not in "\n\t") or code == 0x7F:
        return code
    return None


def _byte_pieces(data: bytes) -> list[Piece]:
    """Bytes -> text pieces, each byte that _byte_value picks its own "byte" piece."""
    out: list[Piece] = []
    run: list[str] = []
    for ch in data.decode("utf-8", errors="surrogateescape"):
        value = _byte_value(ch)
        if value is not None:
            if run:
                out.append(Piece("".join(run)))
                run = []
            out.append(Piece(f"⟨0x{value:02X}⟩", BYTE))
        else:
            run.append(ch)
    if run:
        out.append(Piece("".join(run)))
    return out


@lru_cache(maxsize=1)
def _byte_level_chars() -> dict[str, int]:
    """Byte-level BPE's printable stand-ins (GPT-2, Llama 3, Qwen): each byte is written as one visible character;
    printable Latin-1 bytes as themselves, the other 68 bytes as U+0100 onwards. Returns character -> byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    out = {chr(b): b for b in kept}
    extra = 0
    for b in range(256):
        if b not in kept:
            out[chr(0x100 + extra)] = b
            extra += 1
    return out


_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _token_bytes(tokenizer, token_id: int) -> bytes | None:
    """The raw bytes one subword token stands for, from its vocabulary string: SentencePiece byte fallback
    ("<0x0A>"), byte-level BPE ("Ġthe" -> b" the", when the tokenizer says `byte_level`), SentencePiece words
    ("▁the" -> b" the"); None without an `id_to_token` or for an unknown id."""
    token = tokenizer.id_to_token(token_id) if hasattr(tokenizer, "id_to_token") else None
    if token is None:
        return None
    if m := _BYTE_FALLBACK.fullmatch(token):
        return bytes([int(m.group(1), 16)])
    table = _byte_level_chars()
    if getattr(tokenizer, "byte_level", False) and all(ch in table for ch in token):
        return bytes(table[ch] for ch in token)
    return token.replace("▁", " ").encode("utf-8")


def _unknown(tokenizer, token_id: int) -> bool:
    """Whether a subword tokenizer (one with `id_to_token`) has no token for `token_id` (an id past its vocabulary
    that a model with padded embedding rows can still sample): decode drops such an id, so it is shown as ⟨#id⟩."""
    return hasattr(tokenizer, "id_to_token") and not hasattr(tokenizer, "decode_bytes") and \
        tokenizer.id_to_token(token_id) is None


def _special_names(tokenizer) -> dict[int, str]:
    """id -> ⟨BOS⟩ / ⟨SEP⟩ / ⟨EOS⟩ for the tokenizer's own ids, ⟨its string⟩ for any further eos id."""
    names = {}
    for token_id in getattr(tokenizer, "eos_token_ids", ()):
        names[token_id] = f"⟨{tokenizer.id_to_token(token_id) if hasattr(tokenizer, 'id_to_token') else token_id}⟩"
    for attr, name in SPECIAL_NAMES:
        if getattr(tokenizer, attr, None) is not None:
            names[getattr(tokenizer, attr)] = f"⟨{name}⟩"
    return names


def _special_name(tokenizer, token_id: int, names: dict[int, str] | None = None) -> str | None:
    """The special token's shown name (see _special_names; another special added token, e.g. <|im_start|>, by its
    string), None for an ordinary token. `names`: _special_names(tokenizer), when the caller already has it."""
    name = (_special_names(tokenizer) if names is None else names).get(token_id)
    is_special = getattr(tokenizer, "is_special", None)
    if name is None and is_special is not None and is_special(token_id):
        name = f"⟨{tokenizer.id_to_token(token_id)}⟩"
    return name


VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥"}


def token_label(tokenizer, token_id: int, max_chars: int = 10) -> str:
    """One token as a cell shows it: its text with spaces / newlines / tabs visible (␣ ↵ ⇥), invalid or control
    bytes as ⟨0xNN⟩, special tokens by name (⟨EOS⟩, ⟨<|im_end|>⟩), cut to `max_chars` characters plus "…"."""
    token_id = int(token_id)
    text = _special_name(tokenizer, token_id)
    if text is None and _unknown(tokenizer, token_id):
        text = f"⟨#{token_id}⟩"
    if text is None:
        if hasattr(tokenizer, "decode_bytes"):
            data = tokenizer.decode_bytes([token_id])
        else:
            data = _token_bytes(tokenizer, token_id)
            data = tokenizer.decode([token_id]).encode("utf-8", "surrogatepass") if data is None else data
        text = "".join(p.text if p.kind == BYTE else "".join(VISIBLE.get(c, c) for c in p.text)
                       for p in _byte_pieces(data))
    return text if len(text) <= max_chars else text[:max_chars - 1] + "…"


def token_pieces(tokenizer, ids: Iterable[int]) -> list[Piece]:
    """Token ids -> Pieces in order: runs of ordinary tokens decoded together (so a complete multi-byte character
    is one character), special tokens (the tokenizer's bos/sep/eos ids) as ⟨BOS⟩ / ⟨SEP⟩ / ⟨EOS⟩, and every byte
    that does not decode as ⟨0xNN⟩. A tokenizer without `decode_bytes` (a subword one) has its runs decoded with
    `decode`, or, when that gives U+FFFD (a character split across tokens, or a byte no text has), from the
    tokens' own bytes; its control characters are ⟨0xNN⟩ too, an id past its vocabulary is ⟨#id⟩, and its other
    special tokens (a second eos id, <|im_end|>) are named. Empty text pieces are left out."""
    out: list[Piece] = []
    run: list[int] = []
    names = _special_names(tokenizer)

    def flush() -> None:
        if run:
            if hasattr(tokenizer, "decode_bytes"):
                out.extend(_byte_pieces(tokenizer.decode_bytes(run)))
            elif "\ufffd" in (text := tokenizer.decode(run)) and None not in (raw := [_token_bytes(tokenizer, i)
                                                                                   for i in run]):
                out.extend(_byte_pieces(b"".join(raw)))
            elif text:
                out.extend(_byte_pieces(text.encode("utf-8", "surrogatepass")))
            run.clear()

    for i in ids:
        i = int(i)
        name = _special_name(tokenizer, i, names)
        if name is not None:
            flush()
            out.append(Piece(name, SPECIAL))
        elif _unknown(tokenizer, i):
            flush()
            out.append(Piece(f"⟨#{i}⟩", UNKNOWN))
        else:
            run.append(i)
    flush()
    return out


def shown_text(tokenizer, ids: Iterable[int], specials: bool = False) -> str:
    """The text of `ids` as the pages show it: `token_pieces` joined; special tokens left out unless `specials`."""
    return "".join(p.text for p in token_pieces(tokenizer, ids) if specials or p.kind != SPECIAL)
