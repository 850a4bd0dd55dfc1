"""Untrusted text in, bounded values out: pure parsers (str -> value, or None when the text is not
acceptable) for URL query parameters and text boxes, and the list checks pages run on typed input.

No streamlit: ui.params reads the URL with these, and pages parse their text boxes with them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .safe_text import CONTROL_CHARS, shown

Parser = Callable[[str], Any]  # returns the parsed value, or None when the text is not acceptable


_INT_TEXT = re.compile(r"[+-]?[0-9]{1,18}")  # ASCII digits only: int() would also take "١٢" or "1_000"
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?")


def int_in(lo: int, hi: int) -> Parser:
    """Parse a plain integer (ASCII digits, at most 18) and clamp it to [lo, hi]; None if it is not one."""
    def parse(text: str):
        text = str(text).strip()
        return min(hi, max(lo, int(text))) if _INT_TEXT.fullmatch(text) else None
    return parse


MAX_WHOLE_CHARS = 24  # a typed whole number: room for any 64-bit seed, and a sign
_WHOLE_TEXT = re.compile(r"[+-]?[0-9]+")


def parse_whole(text) -> int | None:
    """A whole number typed in a box, unbounded: ASCII digits with an optional sign, spaces around ignored, after
    NFKC (so ４２ typed with a Chinese IME reads 42); None for anything else (1.5, 1e3, 1_000, abc, ١٢, more than
    MAX_WHOLE_CHARS characters). The caller checks the range, so it can name it."""
    text = unicodedata.normalize("NFKC", str(text)).strip()
    return int(text) if len(text) <= MAX_WHOLE_CHARS and _WHOLE_TEXT.fullmatch(text) else None


def quoted(text, max_chars: int = 30) -> str:
    """Typed text for a markdown message, cut to `max_chars` (…): ui.safe_text.shown, the one escaping helper (no
    link, bold, LaTeX or HTML made of it)."""
    return shown(text, max_chars)


def float_in(lo: float, hi: float) -> Parser:
    """Parse a plain finite decimal number and clamp it to [lo, hi]; None otherwise (nan, inf, text)."""
    def parse(text: str):
        text = str(text).strip()
        return min(hi, max(lo, float(text))) if _FLOAT_TEXT.fullmatch(text) else None
    return parse


def one_of(options: Sequence) -> Parser:
    """Accept only one of `options` (compared as strings); returns the option itself."""
    by_text = {str(o): o for o in options}
    return lambda text: by_text.get(str(text).strip())


def text_max(max_chars: int) -> Parser:
    """Any text without control characters (a null byte, an escape), cut to `max_chars`."""
    return lambda text: CONTROL_CHARS.sub("", str(text)[:max_chars])


@dataclass
class ParsedInts:
    """Result of `parse_int_list`: values, or an error code with details for a friendly message.

    error codes: "empty", "not_a_number" (item), "negative" (item), "out_of_range" (item, lo, hi), "too_long"
    (count, max_len)."""

    values: list[int] = field(default_factory=list)
    error: str | None = None
    detail: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_int_list(text: str, lo: int, hi: int, max_len: int) -> ParsedInts:
    """Parse text like "7, 2, 9" or "[7 2 9]" into integers in [lo, hi] (at most max_len of them)."""
    text = unicodedata.normalize("NFKC", str(text)).replace("、", ",")  # ７，２；９ typed with a Chinese IME
    items = [s for s in re.split(r"[\s,;]+", text.strip().strip("[]()")) if s]
    if not items:
        return ParsedInts(error="empty")
    if len(items) > max_len:
        return ParsedInts(error="too_long", detail={"count": len(items), "max_len": max_len})
    values = []
    for item in items:
        shown = item if len(item) <= 20 else item[:19] + "…"  # what a message quotes
        if re.fullmatch(r"[+-]?[0-9]{10,}", item):  # a whole number, only too big to be a block id
            return ParsedInts(error="negative" if item.startswith("-") else "out_of_range",
                              detail={"item": shown, "lo": lo, "hi": hi})
        if not re.fullmatch(r"[+-]?[0-9]{1,9}", item):
            return ParsedInts(error="not_a_number", detail={"item": shown})
        value = int(item)
        if value < 0:
            return ParsedInts(error="negative", detail={"item": value})
        if not lo <= value <= hi:
            return ParsedInts(error="out_of_range", detail={"item": value, "lo": lo, "hi": hi})
        values.append(value)
    return ParsedInts(values)


def duplicates(values: Sequence[int]) -> list[int]:
    """Values listed more than once, in first-seen order."""
    seen, twice = set(), []
    for v in values:
        if v in seen and v not in twice:
            twice.append(v)
        seen.add(v)
    return twice
