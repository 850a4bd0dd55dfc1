"""The URL round trip: a page's configuration read from the link (parsed by ui.parsers, bounded) and written
back, so a teacher can share a link to an exact state.

`read_param` reads one value and notes what it could not use as given (`show_url_notes` names them in one box);
`Knobs` gives each page knob one starting value per visit and writes the page's knobs back to the URL.
"""

from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

from .parsers import MAX_WHOLE_CHARS, Parser, int_in, one_of, parse_whole, quoted, text_max
from .safe_text import CONTROL_CHARS

MAX_PARAM_CHARS = 10_000  # a URL value longer than this is ignored before any parser sees it
MAX_LINK_STEPS = 300  # a link's steps= (pages 4, 6) is clamped here, with a note: one visit replays at most this many
URL_NOTES_KEY = "_url_notes"  # this run's URL values that could not be used as given: [(name, raw, used)]


STEP_ALIASES = {"step": ("steps",), "steps": ("step",)}  # a chapter page's step link: one name, the other an alias


def link_name(name: str, aliases: Sequence[str] = ()) -> str | None:
    """Which of `name` and its `aliases` the URL holds (the first found), or None."""
    return next((n for n in (name, *aliases) if st.query_params.get(n) is not None), None)


def note_past_end(name: str, used: int) -> None:
    """The link's step (`name` or its STEP_ALIASES alias) lies past the run's end: the link box names it with the
    step `used` instead (replacing a note on the same value)."""
    given = link_name(name, STEP_ALIASES.get(name, ()))
    if given is not None:
        notes = st.session_state.setdefault(URL_NOTES_KEY, [])
        notes[:] = [n for n in notes if n[0] != given] + [(given, st.query_params[given], used)]


def read_param(name: str, parse: Parser, default, aliases: Sequence[str] = ()):
    """st.query_params[name] parsed (else its first alias the URL holds), or `default` when absent or unacceptable.

    Never raises, whatever the URL holds: a value longer than MAX_PARAM_CHARS is not parsed, a value of whitespace
    only (400 spaces) is unusable for every knob, and a parser that fails in any way counts as "unacceptable". A value
    that was ignored, clamped or cut is noted for `show_url_notes`, under the name the link used."""
    name = link_name(name, aliases)
    if name is None:
        return default
    raw = st.query_params.get(name)
    value = None
    if len(raw) <= MAX_PARAM_CHARS and not (raw and not raw.strip()):
        try:
            value = parse(raw)
        except Exception:  # noqa: BLE001  (hostile text must never become a traceback)
            value = None
    used = default if value is None else value
    if value is None or not _same(value, raw):
        st.session_state.setdefault(URL_NOTES_KEY, []).append((name, raw, used if value is not None else None))
    return used


def _same(value, raw: str) -> bool:
    """Whether `value` is what the URL said (not clamped, cut or cleaned): "0.10" and 0.1 are the same."""
    if isinstance(value, float):
        try:
            return float(raw) == value
        except ValueError:
            return False
    return _to_text(value) == raw.strip()


def url_notes() -> list[tuple[str, str, Any]]:
    """This run's noted URL values (name, raw text, value used or None when the default was used); clears them."""
    return st.session_state.pop(URL_NOTES_KEY, [])


SESSION_PARAMS = {"_present": "present"}  # session-wide modes every link keeps: session_state key -> URL name


def write_params(params: dict[str, Any]) -> None:
    """Make the URL's query string exactly `params` (values as text) plus the session's modes that are on
    (present=1); untouched when already equal, so reruns do not churn the browser history."""
    modes = {name: 1 for key, name in SESSION_PARAMS.items() if st.session_state.get(key)}
    wanted = {k: _to_text(v) for k, v in {**params, **modes}.items() if v is not None}
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
        """A whole number in [lo, hi], typed in a text box and checked here, not in the browser: Streamlit's number
        input refuses a value outside its bounds (with none: any integer from 2**53 on) with only a red border, and
        keeps its old value without telling the page. Text that is not a whole number in [lo, hi] leaves
        the last good value in use, and an error under the box says so, in the page's language."""
        key = self._start(name, default, int_in(lo, hi))
        if not isinstance(st.session_state[key], str):  # seeded from the URL or the last visit as a number
            st.session_state[key] = str(st.session_state[key])
        text = where.text_input(label, key=key, max_chars=MAX_WHOLE_CHARS, **kw)
        value = parse_whole(text)
        if value is not None and lo <= value <= hi:
            return self._done(name, value)
        from .page import current_lang  # (ui.page imports this module)
        from .strings import t

        used = st.session_state.get(f"_keep.{key}", default)
        where.error(t("common.not_whole", current_lang(), label=label, text=quoted(text), lo=lo, hi=hi, used=used),
                    icon=":material/error:")
        return self._done(name, used)

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

    def toggle(self, label: str, name: str, default: bool, where=st, **kw) -> bool:
        """An on/off switch; the URL holds it as 1 / 0."""
        key = self._start(name, default, one_of([0, 1]))
        st.session_state[key] = bool(st.session_state[key])
        return self._done(name, where.toggle(label, key=key, **kw))

    def text(self, label: str, name: str, default: str, max_chars: int = 200, where=st, **kw) -> str:
        key = self._start(name, default, text_max(max_chars))
        return self._done(name, where.text_input(label, key=key, max_chars=max_chars, **kw))

    # --- non-widget state ---------------------------------------------------------------------------------------
    def state(self, name: str, default, parse: Parser, aliases: Sequence[str] = ()):
        """A value kept in st.session_state["<page>.<name>"] (not a widget), seeded from the URL (`name`, else one
        of its `aliases`) on the first visit of the session. Read it again after `set_state`."""
        key = self.key(name)
        if key not in st.session_state:
            st.session_state[key] = read_param(name, parse, default, aliases)
        self.values[name] = st.session_state[key]
        return st.session_state[key]

    def step(self, name: str, last: int, cap: int = MAX_LINK_STEPS) -> int:
        """A chapter page's shown step in [0, last], kept like `state`: a link may say `step=` or `steps=` (the
        other name an alias, STEP_ALIASES), and a link's step past the run's end is named in the link box with the
        step used, as a clamped value is."""
        fresh = self.key(name) not in st.session_state
        value = self.state(name, 0, int_in(0, cap), STEP_ALIASES.get(name, ()))
        if value > last:
            if fresh:
                note_past_end(name, last)
            value = last
        self.set_state(name, value)
        return value

    def set_state(self, name: str, value) -> None:
        st.session_state[self.key(name)] = value
        self.values[name] = value

    def sync_url(self, lang: str, **extra) -> None:
        """Write lang, every knob read so far and `extra` to the URL; say which of the link's values were not used
        as given (in the box `ui.setup_page` placed at the top of the page)."""
        show_url_notes(lang)
        write_params({"lang": lang, **self.values, **extra})


NOTES_BOX_KEY = "_url_notes_box"  # where show_url_notes writes: a container at the top of this run's page


def _shown_raw(raw: str, lang: str) -> str:
    """A link's value as the link box quotes it: cut to 40 characters (then with its length), control characters
    escaped, and a value of whitespace only (400 spaces: invisible in the box) said in words.

    Raises: nothing."""
    from .strings import t

    if raw and not raw.strip():
        return t("common.url_blank", lang, count=len(raw))
    shown = raw if len(raw) <= 40 else raw[:37] + "…"
    shown = shown.encode("unicode_escape").decode("ascii") if CONTROL_CHARS.search(shown) else shown
    shown = shown.replace("`", "'")
    return shown if len(raw) <= 40 else t("common.url_long", lang, shown=shown, count=len(raw))


def show_url_notes(lang: str) -> None:
    """One box listing this run's URL values that were ignored, clamped or cut (see `read_param`), with the fix."""
    notes = url_notes()
    if not notes:
        return
    from .strings import t  # the page's language; imported here to keep the parsers above free of UI strings

    lines = []
    for name, raw, used in notes:
        key = "common.url_ignored" if used is None else "common.url_adjusted"
        lines.append("- " + t(key, lang, name=name, raw=_shown_raw(raw, lang), used=_to_text(used)))
    box = st.session_state.get(NOTES_BOX_KEY) or st
    box.warning(f"**{t('common.url_title', lang)}**  \n" + "\n".join(lines) + f"\n\n{t('common.fix', lang)} "
                f"{t('common.url_fix', lang)}", icon=":material/link_off:")
