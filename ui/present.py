"""Presenter mode: the app readable from the back row of a classroom.

On (sidebar toggle, or `?present=1` in a link; kept for the session and written back into the URL):
  - the sidebar starts collapsed (settings folded away; everything a lesson needs is in the page)
  - body text >= 20 px, headings and metrics larger, narrower page margins
  - figures stacked above their notes at full width, their text >= 16 px, cells larger (ui.fit.present_figure)
  - the playback bar shows a large step counter and one line saying what the last step did

Always (both modes): a figure row whose main area is narrower than 1000 px stacks its figure above its note, so a
fixed-size grid is never squeezed into a narrow column (its cells would overlap); below 700 px a row of metrics wraps
onto a second line instead of breaking its labels mid-word; a table wider than its column scrolls inside itself, and
fades out at an edge where more of it lies beyond (SCROLL_FADE_CSS).
"""

from __future__ import annotations

import streamlit as st

from ui.strings import t
from viz.cells import CELLS_CSS, PRESENT_CELLS_CSS
from viz.chain_live import CHAIN_CSS, PRESENT_CHAIN_CSS

from .params import read_param
from .parsers import one_of

PRESENT_KEY = "_present"                # the mode, kept for the whole browser session
PRESENT_WIDGET_KEY = "_present_widget"  # the sidebar toggle that edits it
BODY_PX, FIGURE_PX = 20, 16             # the smallest text in presenter mode (body, figures)
METRIC_PX = 44                          # a metric's value in presenter mode (36 px without it)

# A figure row: columns (not a horizontal container) one of which holds a chart, a table, or a note in its last
# column ("what to notice" beside a figure or a table).
_ROW = '[data-testid="stHorizontalBlock"]'
_FIGURE_ROW = ", ".join(f'{_ROW}:has(> [data-testid="stColumn"]{inner})' for inner in (
    ' [data-testid="stPlotlyChart"]', ' [data-testid="stDataFrame"]', ' [data-testid="stTable"]',
    ':last-child:nth-child(2) [data-testid="stAlert"]'))
_STACKED = f"""
:is({_FIGURE_ROW}) {{ flex-wrap: wrap !important; }}
:is({_FIGURE_ROW}) > [data-testid="stColumn"] {{ flex: 1 1 100% !important; width: 100% !important;
    min-width: 100% !important; }}
"""
# A row of metrics (st.columns of st.metric): in a narrow main area its columns wrap onto a second line rather than
# shrink below METRIC_MIN_REM, where a label such as physical_block_id would be broken mid-word.
_METRIC_ROW = f'{_ROW}:has(> [data-testid="stColumn"] [data-testid="stMetric"])'
METRIC_MIN_REM = 8.5
# A table that scrolls sideways fades out at each edge with more beyond it: where scrollbars stay hidden until used
# (macOS), nothing else shows that it scrolls. CSS only: a scroll-driven animation (the table's own horizontal scroll
# position drives it) moves the fades; a table that fits has no scroll range, so the animation is inactive and both
# fades stay at width 0. A mask, not a shadow painted over the table: it needs no theme colour. Browsers without
# scroll timelines (Firefox, Safari before 26) show the table as before.
_SCROLLERS = '[data-testid="stTable"] > div, [data-testid="stMarkdownContainer"] table'
FADE_REM = 2.5
LENGTH_SYNTAX = r"\3c length\3e "  # "<length>", escaped: st.html's sanitizer drops a style holding "<" + a letter
SCROLL_FADE_CSS = f"""
@property --paged-fade-start {{ syntax: "{LENGTH_SYNTAX}"; inherits: false; initial-value: 0px; }}
@property --paged-fade-end {{ syntax: "{LENGTH_SYNTAX}"; inherits: false; initial-value: 0px; }}
@keyframes paged-scroll-fade {{
    from {{ --paged-fade-start: 0px; --paged-fade-end: {FADE_REM}rem; }}
    8%, 92% {{ --paged-fade-start: {FADE_REM}rem; --paged-fade-end: {FADE_REM}rem; }}
    to {{ --paged-fade-start: {FADE_REM}rem; --paged-fade-end: 0px; }} }}
@supports (animation-timeline: scroll()) {{
    :is({_SCROLLERS}) {{ animation: paged-scroll-fade linear both; animation-timeline: scroll(self inline);
        mask-image: linear-gradient(to right, transparent, #000 var(--paged-fade-start),
                                    #000 calc(100% - var(--paged-fade-end)), transparent); }} }}
"""
# A figure's text alternative (ui.widgets, viz.describe): read by a screen reader, not shown (the usual
# clip; not display:none, which would hide it from the reader too). A markdown block holding nothing else
# takes no room.
SR_ONLY_CSS = """
.paged-sr-only { position: absolute !important; width: 1px; height: 1px; padding: 0; margin: -1px;
    overflow: hidden; clip: rect(0 0 0 0); clip-path: inset(50%); white-space: nowrap; border: 0; }
[data-testid="stElementContainer"]:has(> [data-testid="stMarkdown"] .paged-sr-only):not(:has(.paged-figure-title)) {
    position: absolute !important; width: 1px !important; height: 1px !important; overflow: hidden; }
"""
# WCAG AA contrast (4.5:1 for normal text): Streamlit draws captions and a (secondary) button's shortcut
# badge in its faded grey (its text colour at 60% opacity: #828180 on white, 3.88:1). CAPTION_INK is 6.5:1 on
# white and 5.8:1 on the sidebar's grey. The theme is pinned to light (.streamlit/config.toml): the figures and
# cells are drawn for a white page.
CAPTION_INK = "#5C5E66"
CONTRAST_CSS = f"""
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] *,
button:not([kind^="primary"]) kbd[aria-label^="Shortcut"] {{
    color: {CAPTION_INK} !important; opacity: 1 !important; }}
"""
# A note beside a narrow figure in a horizontal container (st.container(horizontal=True), not columns: those stack
# below 1000 px), keyed "..._beside_note": it keeps BESIDE_MIN_REM, or else wraps under the figure, never squeezed.
BESIDE_MIN_REM = 20
_BESIDE = f"""
[data-testid="stLayoutWrapper"]:has(> [class*="_beside_note"]) {{ min-width: min({BESIDE_MIN_REM}rem, 100%); }}
"""
BASE_CSS = f"""
[data-testid="stMainBlockContainer"] {{ container-type: inline-size; container-name: paged-main; }}
[data-testid="stTable"] :is(td, th, td *, th *) {{ white-space: normal !important; overflow-wrap: normal !important;
    word-break: keep-all !important; }}
[data-testid="stTable"] > div {{ overflow-x: auto; }}
[data-testid="stMarkdownContainer"] table {{ display: block; max-width: 100%; overflow-x: auto; }}
.paged-figure-title {{ font-weight: 600; margin-bottom: -0.3rem; }}
[data-testid="stMetricLabel"] :is(div, p, label) {{ white-space: normal !important; overflow: visible !important;
    text-overflow: clip !important; }}
{_METRIC_ROW} {{ align-items: flex-end; }}  /* a label on two lines does not push its value below its neighbours' */
@container paged-main (max-width: 1000px) {{ {_STACKED}
    [data-testid="stTable"] :is(td, th) {{ padding-left: 0.35rem !important; padding-right: 0.35rem !important; }} }}
@container paged-main (max-width: 700px) {{
    {_METRIC_ROW} {{ flex-wrap: wrap !important; }}
    {_METRIC_ROW} > [data-testid="stColumn"] {{ flex: 1 1 {METRIC_MIN_REM}rem !important;
        min-width: {METRIC_MIN_REM}rem !important; }} }}
{_BESIDE}{SCROLL_FADE_CSS}{SR_ONLY_CSS}{CONTRAST_CSS}{CHAIN_CSS}{CELLS_CSS}"""
PRESENT_CSS = f"""
{_STACKED}
[data-testid="stMainBlockContainer"] {{ padding: 2.5rem 1.5rem 4rem 1.5rem !important; max-width: none !important; }}
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] td,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] th,
[data-testid="stMain"] [data-testid="stCaptionContainer"],
[data-testid="stMain"] [data-testid="stCaptionContainer"] p,
[data-testid="stMain"] [data-testid="stWidgetLabel"] p,
[data-testid="stMain"] [data-testid="stMetricLabel"] p,
[data-testid="stMain"] [data-testid="stTable"] td,
[data-testid="stMain"] [data-testid="stTable"] th,
[data-testid="stMain"] [data-testid="stExpander"] summary p,
[data-testid="stMain"] input,
[data-testid="stMain"] [data-baseweb="select"] div,
[data-testid="stMain"] button p,
[data-testid="stMain"] a p {{ font-size: {BODY_PX}px !important; line-height: 1.45 !important; }}
[data-testid="stMain"] h1 {{ font-size: 46px !important; }}
[data-testid="stMain"] h2 {{ font-size: 34px !important; }}
[data-testid="stMain"] h3 {{ font-size: 28px !important; }}
[data-testid="stMain"] [data-testid="stMetricValue"] :is(div, p) {{ font-size: {METRIC_PX}px !important;
    line-height: 1.2 !important; }}  /* after the body-text rule: the value is a markdown p, which would get 20 px */
[data-testid="stMain"] button {{ min-height: 48px; }}
.paged-counter {{ font-size: 52px; font-weight: 700; line-height: 1.1; white-space: nowrap; }}
[data-testid="stMain"] [class*="st-key-paged_say_"] [data-testid="stMarkdownContainer"] p {{ font-size: 24px !important;
    line-height: 1.35 !important; }}
.paged-figure-title {{ font-size: 22px !important; }}
[data-testid="stMain"] [data-testid="stCheckbox"] label {{ align-items: center; }}  /* switch beside 20 px text */
{PRESENT_CHAIN_CSS}{PRESENT_CELLS_CSS}"""


def present_mode() -> bool:
    """The session's presenter mode: set by the sidebar toggle, else taken once from `?present=1`, else off."""
    if PRESENT_KEY not in st.session_state:
        st.session_state[PRESENT_KEY] = bool(read_param("present", one_of([0, 1]), 0))
    return st.session_state[PRESENT_KEY]


def _on_toggle() -> None:
    st.session_state[PRESENT_KEY] = bool(st.session_state[PRESENT_WIDGET_KEY])


def presenter_toggle(lang: str, on: bool) -> None:
    """The sidebar switch; the choice persists across pages (session_state) and goes into links (?present=1)."""
    st.session_state[PRESENT_WIDGET_KEY] = on
    st.sidebar.toggle(t("classroom.present", lang), key=PRESENT_WIDGET_KEY, on_change=_on_toggle,
                      help=t("classroom.present_help", lang))


def key_names_css(lang: str) -> str:
    """Streamlit prints a button's shortcut in English ("Space"); in another language the badge shows the key's
    name there (classroom.key_space), laid over the English word it hides (so the badge keeps its size)."""
    name = t("classroom.key_space", lang)
    if name == t("classroom.key_space", "en"):
        return ""
    kbd = 'kbd[aria-label="Shortcut Space"]'
    # the English glyphs are made transparent (-webkit-text-fill-color), the badge's own colour is kept for the name
    return (f"{kbd} {{ position: relative; -webkit-text-fill-color: transparent; }}"
            f"{kbd}::after {{ content: \"{name}\"; position: absolute; inset: 0; display: flex; align-items: center; "
            f"justify-content: center; -webkit-text-fill-color: currentcolor; }}")


def inject_css(on: bool, lang: str = "en") -> None:
    """This run's style sheet: the base rules, and the presenter's when on (a style-only st.html takes no space)."""
    st.html(f"<style>{BASE_CSS}{PRESENT_CSS if on else ''}{key_names_css(lang)}</style>")
