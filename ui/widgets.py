"""Small render helpers every page reuses: errors with their fix, "what to notice", export trace, and a
per-session cache of expensive runs."""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import pandas as pd
import streamlit as st

import html

import plotly.graph_objects as go

from ui.strings import t
from viz.describe import AltWords, figure_alt, markup_alt

from .fit import figure_spec, present_spec, take_title_spec
from .page import LANG_KEY, PageContext
from .present import PRESENT_KEY
from .safe_text import shown


def show_error(ctx: PageContext, what: str, fix: str, where=None) -> None:
    """st.error with the problem and how to fix it (never a traceback)."""
    (where or st).error(f"**{what}**  \n{ctx.t('common.fix')} {fix}", icon=":material/error:")


def stop_with_error(ctx: PageContext, what: str, fix: str) -> None:
    """show_error, then stop this run of the page (the rest would only repeat the error)."""
    show_error(ctx, what, fix)
    st.stop()


_BREAK_AFTER = re.compile(r"(::|/|_)")  # where a long identifier may wrap: paths, test names, snake_case


def breakable(text: str) -> str:
    """`text` as markdown-safe HTML in which a long identifier such as tests/paged/test_attention.py::test_early_x
    may wrap only after "/", "::" or "_" (a <wbr>), never mid-word. Everything else is escaped (HTML and
    markdown's `*`, `_`, backquote): render it with st.markdown(..., unsafe_allow_html=True)."""
    out = html.escape(text, quote=False)
    out = re.sub(r"([*`\\\[\]])", r"\\\1", out)
    return _BREAK_AFTER.sub(lambda m: ("\\_" if m.group(1) == "_" else m.group(1)) + "<wbr>", out)


def card(title: str, body: str, key: str | None = None, where=None) -> None:
    """A bordered box: a bold title over `body` (plain text; long identifiers wrap between their parts, `breakable`)."""
    with (where or st).container(border=True, key=key):
        st.markdown(f"**{html.escape(title, quote=False)}**  \n{breakable(body)}", unsafe_allow_html=True)


def notice(ctx: PageContext, text: str, where=None) -> None:
    """The "what to notice" box placed beside a figure."""
    (where or st).info(f"**{ctx.t('common.notice')}** {text}", icon=":material/visibility:")


def export_button(ctx: PageContext, trace, file_name: str, key: str | None = None, where=None) -> None:
    """Download `trace` as pretty JSON. `trace` is a dict, or a function returning one (or its JSON text already):
    then the JSON is made only when the button is pressed, so a long session's trace costs nothing per rerun. The file travels to the browser
    inside the page's own messages and is saved from there (ui.export), never as a server media file that another
    session's run may clean up before the browser fetches it."""
    from .export import save_button

    from lessons.engine_views import export_text  # the exports' one JSON format

    def text() -> str:
        doc = trace() if callable(trace) else trace
        return doc if isinstance(doc, str) else export_text(doc)

    save_button(ctx.t("common.export"), text, file_name, key=key or f"export.{file_name}", where=where)


class _Spec(go.Figure):
    """A figure already in plain dicts, for st.plotly_chart: it asks a go.Figure only for .to_dict() (then sends it
    as JSON unvalidated), so this one answers with the dicts and skips plotly's deep copy and the go.Figure build."""

    def __init__(self, spec: dict):  # noqa: super().__init__ is skipped on purpose (it would copy and check all)
        self._spec = spec

    def to_dict(self) -> dict:
        return self._spec


def alt_words(lang: str) -> AltWords:
    """viz.describe's words for a text alternative in `lang` (ui/strings/a11y.py)."""
    return AltWords(**{f.name: t(f"a11y.{f.name}", lang) for f in dataclasses.fields(AltWords)})


SR_ONLY = "paged-sr-only"  # the CSS class (ui.present) of text a screen reader reads and the screen does not show


def _title_and_alt(title: str | None, alt: str) -> str:
    """The markup above a figure: its title (lines split at <br>), then its text alternative, visually hidden."""
    lang = st.session_state.get(LANG_KEY, "en")
    out = ""
    if title:
        text = "<br>".join(html.escape(line) for line in title.split("<br>"))
        out = f"<div class='paged-figure-title'>{text}</div>"
    return out + f"<div class='{SR_ONLY}'>{html.escape(t('a11y.label', lang))} {html.escape(alt)}</div>"


def show_figure(fig, key: str, where=None) -> None:
    """st.plotly_chart without the mode bar; a figure that sets its own width (a grid of fixed-size cells) keeps
    it, any other stretches to the column. Its title is shown above it as text, which wraps at any width (a plotly
    title is cut at the figure's edge), followed by what it shows in words for a screen reader (viz.describe,
    visually hidden); in presenter mode the figure's text and cells are larger (ui.fit).
    `fig` is left unchanged; what is sent is its plain dicts (ui.fit.figure_spec), with no copy of its data."""
    where = where or st
    spec = present_spec(fig.to_dict()) if st.session_state.get(PRESENT_KEY) else figure_spec(fig)
    title = take_title_spec(spec)
    alt = figure_alt(spec, alt_words(st.session_state.get(LANG_KEY, "en")))
    where.markdown(_title_and_alt(title, alt), unsafe_allow_html=True)
    width = "content" if spec["layout"].get("width") else "stretch"
    where.plotly_chart(_Spec(spec), key=key, width=width, config={"displayModeBar": False})


def show_cells(markup: str, title: str, key: str, where=None) -> None:
    """An HTML diagram (viz.cells, viz.chain_live) under its title, as show_figure shows a figure's (its text
    alternative too: viz.describe.markup_alt), in a container named `key` (CSS class st-key-<key>)."""
    box = (where or st).container(key=key)
    alt = markup_alt(markup, alt_words(st.session_state.get(LANG_KEY, "en")))
    box.markdown(_title_and_alt(title, alt), unsafe_allow_html=True)
    box.html(markup)


PROSE_EM, PROSE_BELOW_PX = 11, 700  # a state table's column of running text is >= 11 em in a main area < 700 px
# (there the table scrolls sideways anyway; wider, every column fits without it)
CSS_KEY = re.compile(r"[^a-zA-Z0-9_-]")  # Streamlit writes a key's other characters as "-" in its st-key-<key> class


def state_table(rows: list[dict], key: str, where=None, prose: Sequence[str] = (), foreign: Sequence[str] = ()) -> None:
    """A small table of per-sequence state as HTML (st.table). Words and numbers are never broken inside (ui.present's
    table rules): at a narrow width the table scrolls sideways inside itself. The first column is the row label;
    `prose` names columns of running text (a prompt, an output), kept at least PROSE_EM wide in a narrow main area
    so their lines stay readable. `key` names the table's container (CSS class st-key-<key>). st.table renders
    cells as markdown: `foreign` names columns of text from outside (a typed prompt, a checkpoint's tokens), shown
    as text (ui.safe_text.shown)."""
    rows = [{k: shown(v, max_chars=None) if k in foreign and isinstance(v, str) else v for k, v in row.items()}
            for row in rows] if foreign else rows
    frame = pd.DataFrame(rows)
    box = (where or st).container(key=key)
    positions = [i + 1 for i, name in enumerate(frame.columns) if name in prose]  # nth-child: the row label is 1
    if positions:
        scope = f".st-key-{CSS_KEY.sub('-', key.strip())}"
        rules = "".join(f"{scope} :is(td, th):nth-child({n}) {{ min-width: {PROSE_EM}em; }}" for n in positions)
        box.html(f"<style>@container paged-main (max-width: {PROSE_BELOW_PX}px) {{ {rules} }}</style>")
    box.table(frame.set_index(frame.columns[0]))


def viz_labels(ctx: PageContext, cls, prefix: str):
    """A viz builder's words in the page's language: an instance of the dataclass `cls` (e.g. viz.mapping.MappingLabels)
    whose every field is the page's string "<prefix>_<field>" (KeyError naming a missing one)."""
    return cls(**{f.name: ctx.t(f"{prefix}_{f.name}") for f in dataclasses.fields(cls)})


def session_cached(store: str, key, compute, max_items: int):
    """compute() once per session for `key`, kept in st.session_state[store] (the newest `max_items` kept).

    Per session, not st.cache_data: results depend on what this user ran, and sessions must not share them."""
    runs = st.session_state.setdefault(store, {})
    if key not in runs:
        runs[key] = compute()
        while len(runs) > max_items:
            runs.pop(next(iter(runs)))  # dicts keep insertion order: the first is the oldest
    return runs[key]


RUN_DASH = "\u2060–\u2060"  # "24–27" with word joiners: a narrow table never breaks a run there


def slot_runs(ctx, slots, keep: int = 2) -> str:
    """Slots written as runs of neighbours: "24–27, 40–43" (a block's slots are neighbours, two
    blocks seldom are), never one range over slots that are not contiguous; past `keep` runs the rest
    is counted ("+3 more runs"). The one formatter for a list of slots (or positions) on every page. Raises nothing."""
    if not slots:
        return "—"
    runs: list[list[int]] = []
    for slot in slots:
        if runs and slot == runs[-1][-1] + 1:
            runs[-1].append(slot)
        else:
            runs.append([slot])
    shown = [str(r[0]) if len(r) == 1 else f"{r[0]}{RUN_DASH}{r[-1]}" for r in runs[:keep]]
    more = [ctx.t("chain.slots_more", count=len(runs) - keep)] if len(runs) > keep else []
    return ", ".join(shown + more)
