"""How the pages show token ids as text: special tokens spelled out (⟨BOS⟩, ⟨SEP⟩, ⟨EOS⟩), and bytes that are not
valid UTF-8 (or are invisible control characters) shown as ⟨0xE6⟩, never as "�" or nothing.

The byte tokenizer of the shipped model maps one token to one byte, so a sampled token can be half of a Chinese
character or a byte no text contains; `decode` turns each such byte into U+FFFD and the reader loses which byte it
was. `token_pieces` keeps it. Pages build their markup from the pieces (escape each piece's text, then wrap it),
so no transformation ever runs over markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

TEXT, SPECIAL, BYTE = "text", "special", "byte"
SPECIAL_NAMES = (("bos_token_id", "BOS"), ("sep_token_id", "SEP"), ("eos_token_id", "EOS"))


@dataclass(frozen=True)
class Piece:
    """A run of token ids as shown: decoded text (kind "text"), a special token ("⟨EOS⟩", kind "special") or one
    byte that is not valid UTF-8 at its place ("⟨0xE6⟩", kind "byte")."""

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


def token_pieces(tokenizer, ids: Iterable[int]) -> list[Piece]:
    """Token ids -> Pieces in order: runs of ordinary tokens decoded together (so a complete multi-byte character
    is one character), special tokens (the tokenizer's bos/sep/eos ids) as ⟨BOS⟩ / ⟨SEP⟩ / ⟨EOS⟩, and every byte
    that does not decode as ⟨0xNN⟩. A tokenizer without `decode_bytes` (a subword one) has its runs decoded with
    `decode`. Empty text pieces are left out."""
    names = {getattr(tokenizer, attr, None): name for attr, name in SPECIAL_NAMES}
    names.pop(None, None)
    out: list[Piece] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            if hasattr(tokenizer, "decode_bytes"):
                out.extend(_byte_pieces(tokenizer.decode_bytes(run)))
            elif text := tokenizer.decode(run):
                out.append(Piece(text))
            run.clear()

    for i in ids:
        i = int(i)
        if i in names:
            flush()
            out.append(Piece(f"⟨{names[i]}⟩", SPECIAL))
        else:
            run.append(i)
    flush()
    return out


def shown_text(tokenizer, ids: Iterable[int], specials: bool = False) -> str:
    """The text of `ids` as the pages show it: `token_pieces` joined; special tokens left out unless `specials`."""
    return "".join(p.text for p in token_pieces(tokenizer, ids) if specials or p.kind != SPECIAL)
