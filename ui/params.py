"""Untrusted text in, bounded values out: URL query parameters and text boxes.

Pure parsers (no streamlit) plus `Knobs`, which gives each page knob one starting value per visit and writes the
page's configuration back to the URL, so a teacher can share a link to an exact state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import streamlit as st

Parser = Callable[[str], Any]  # returns the parsed value, or None when the text is not acceptable


# --- parsers: str -> value | None ---------------------------------------------------------------------------------
def int_in(lo: int, hi: int) -> Parser:
    """Parse an integer and clamp it to [lo, hi]; None if it is not an integer."""
    def parse(text: str):
        try:
            return min(hi, max(lo, int(str(text).strip())))
        except ValueError:
            return None
    return parse


def float_in(lo: float, hi: float) -> Parser:
    """Parse a finite float and clamp it to [lo, hi]; None otherwise."""
    def parse(text: str):
        try:
            value = float(str(text).strip())
        except ValueError:
            return None
        return min(hi, max(lo, value)) if value == value and abs(value) != float("inf") else None
    return parse


def one_of(options: Sequence) -> Parser:
    """Accept only one of `options` (compared as strings); returns the option itself."""
    by_text = {str(o): o for o in options}
    return lambda text: by_text.get(str(text).strip())


def text_max(max_chars: int) -> Parser:
    """Any text, cut to `max_chars`."""
    return lambda text: str(text)[:max_chars]


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
    items = [s for s in re.split(r"[\s,;]+", str(text).strip().strip("[]()")) if s]
    if not items:
        return ParsedInts(error="empty")
    if len(items) > max_len:
        return ParsedInts(error="too_long", detail={"count": len(items), "max_len": max_len})
    values = []
    for item in items:
        if not re.fullmatch(r"[+-]?\d{1,9}", item):
            return ParsedInts(error="not_a_number", detail={"item": item[:20]})
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


# --- the URL round trip -------------------------------------------------------------------------------------------
def read_param(name: str, parse: Parser, default):
    """st.query_params[name] parsed, or `default` when absent or unacceptable."""
    raw = st.query_params.get(name)
    if raw is None:
        return default
    value = parse(raw)
    return default if value is None else value


def write_params(params: dict[str, Any]) -> None:
    """Make the URL's query string exactly `params` (values as text); untouched when already equal, so reruns do
    not churn the browser history."""
    wanted = {k: _to_text(v) for k, v in params.items() if v is not None}
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def _to_text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class Knobs:
    """A page's knobs: bounded widgets whose values round-trip through the URL.

    Each knob is a widget with key "<page>.<name>" and URL parameter "<name>". Its starting value on a visit is:
    the URL's value (parsed and clamped), else the value it had when the learner last left this page in this
    session, else the default. Afterwards the widget owns it. `state` does the same for values that are not widgets
    (a step index). Call `sync_url()` once all knobs are read.

        knobs = Knobs("gather")
        block_size = knobs.select(tr("block_size"), "block_size", 4, [1, 2, 4, 8, 16, 32], where=st.sidebar)
        step = knobs.state("step", 0, int_in(0, 512))
        ...
        knobs.sync_url(ctx.lang)
    """

    def __init__(self, page: str) -> None:
        self.page = page
        self.values: dict[str, Any] = {}

    def key(self, name: str) -> str:
        return f"{self.page}.{name}"

    def _start(self, name: str, default, parse: Parser) -> str:
        """Seed the widget's session value when it has none (first run on this visit); return its key."""
        key = self.key(name)
        if key not in st.session_state:
            kept = st.session_state.get(f"_keep.{key}", default)
            st.session_state[key] = read_param(name, parse, kept)
        return key

    def _done(self, name: str, value):
        self.values[name] = value
        st.session_state[f"_keep.{self.key(name)}"] = value  # survives the widget's clean-up on page change
        return value

    # --- widgets ------------------------------------------------------------------------------------------------
    def slider(self, label: str, name: str, default: int, lo: int, hi: int, where=st, **kw) -> int:
        key = self._start(name, default, int_in(lo, hi))
        st.session_state[key] = min(hi, max(lo, st.session_state[key]))  # bounds may depend on other knobs
        return self._done(name, where.slider(label, lo, hi, key=key, **kw))

    def number(self, label: str, name: str, default: int, lo: int, hi: int, where=st, **kw) -> int:
        key = self._start(name, default, int_in(lo, hi))
        return self._done(name, int(where.number_input(label, lo, hi, step=1, key=key, **kw)))

    def select(self, label: str, name: str, default, options: Sequence, where=st, **kw):
        key = self._start(name, default, one_of(options))
        if st.session_state[key] not in options:
            st.session_state[key] = default
        return self._done(name, where.selectbox(label, list(options), key=key, **kw))

    def radio(self, label: str, name: str, default, options: Sequence, where=st, **kw):
        key = self._start(name, default, one_of(options))
        if st.session_state[key] not in options:
            st.session_state[key] = default
        return self._done(name, where.radio(label, list(options), key=key, **kw))

    def text(self, label: str, name: str, default: str, max_chars: int = 200, where=st, **kw) -> str:
        key = self._start(name, default, text_max(max_chars))
        return self._done(name, where.text_input(label, key=key, max_chars=max_chars, **kw))

    # --- non-widget state ---------------------------------------------------------------------------------------
    def state(self, name: str, default, parse: Parser):
        """A value kept in st.session_state["<page>.<name>"] (not a widget), seeded from the URL on the first
        visit of the session. Read it again after `set_state`."""
        key = self.key(name)
        if key not in st.session_state:
            st.session_state[key] = read_param(name, parse, default)
        self.values[name] = st.session_state[key]
        return st.session_state[key]

    def set_state(self, name: str, value) -> None:
        st.session_state[self.key(name)] = value
        self.values[name] = value

    def sync_url(self, lang: str, **extra) -> None:
        """Write lang, every knob read so far and `extra` to the URL."""
        write_params({"lang": lang, **self.values, **extra})
