"""The app's navigation: `st.navigation` with translated page names, each page at the URL path it always had, and
previous / next links in the page itself (so a lesson never needs the sidebar).

    app.py:  ui.nav.run()     # builds the navigation for this run's language, runs the page, draws prev / next

Every page script stays runnable on its own (`AppTest.from_file("app_pages/3_Batch_decode.py")`): nothing here is
needed for a page to draw itself.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from ui.strings import t

from .page import current_lang

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class NavPage:
    script: str      # path from the repository root
    url_path: str    # "" for the home page; else the path share links use (/Batch_decode)
    name: str        # its title is ui/strings/classroom.py "nav_<name>"
    icon: str        # a Material icon: renders without a colour-emoji font


PAGES = (
    NavPage("app_pages/0_Home.py", "", "home", ":material/home:"),
    NavPage("app_pages/1_Address_translation.py", "Address_translation", "address", ":material/route:"),
    NavPage("app_pages/2_Gather_and_attend.py", "Gather_and_attend", "gather", ":material/merge:"),
    NavPage("app_pages/3_Batch_decode.py", "Batch_decode", "batch", ":material/view_module:"),
    NavPage("app_pages/4_Engine.py", "Engine", "engine", ":material/settings:"),
    NavPage("app_pages/5_Bug_lab.py", "Bug_lab", "buglab", ":material/bug_report:"),
    NavPage("app_pages/6_Sharing.py", "Sharing", "sharing", ":material/call_split:"),
    NavPage("app_pages/7_Correct_to_fast.py", "Correct_to_fast", "fast", ":material/speed:"),
    NavPage("app_pages/8_Teaching_guide.py", "Teaching_guide", "guide", ":material/school:"),
    NavPage("app_pages/9_Beam_search.py", "Beam_search", "beam", ":material/account_tree:"),
    NavPage("app_pages/10_Swap_or_recompute.py", "Swap_or_recompute", "swap", ":material/swap_horiz:"),
    NavPage("app_pages/11_Sliding_window.py", "Sliding_window", "window", ":material/view_week:"),
    NavPage("app_pages/12_Speculative_decoding.py", "Speculative_decoding", "spec", ":material/bolt:"),
)
# The learner's-code page: listed only when the server was started with PAGED_EXERCISES=DIR.
EXERCISES_PAGE = NavPage("app_pages/13_Your_turn.py", "Your_turn", "exercises",
                         ":material/edit_note:")
# The navigation's sections, in the listed order (title: ui/strings/classroom.py "section_<key>"):
# a newcomer's core path is Home, then pages 1-4; the rest follows, numbered as listed.
SECTIONS = (
    ("start", ("home",)),
    ("core", ("address", "gather", "batch", "engine")),
    ("further", ("buglab", "sharing", "fast")),
    ("teaching", ("guide",)),
    ("chapters", ("beam", "swap", "window", "spec")),
    ("yours", ("exercises",)),
)
CORE_PATH = dict(SECTIONS)["core"]
BY_NAME = {p.name: p for p in PAGES}
NAV_KEY = "_nav_pages"  # this run's st.Page objects by script, set by run(): page links use them when present


def title(page: NavPage, lang: str) -> str:
    if page is EXERCISES_PAGE:
        return t("exercises.nav", lang)
    return t(f"classroom.nav_{page.name}", lang)


def listed() -> tuple[NavPage, ...]:
    """PAGES, plus page 13 when this server was started with PAGED_EXERCISES set (never from the
    browser)."""
    return PAGES + ((EXERCISES_PAGE,) if os.environ.get("PAGED_EXERCISES", "").strip() else ())


def sections(pages: dict[str, st.Page], lang: str) -> dict[str, list[st.Page]]:
    """build()'s pages (by script) grouped under SECTIONS' titles in `lang`, in the listed order; an
    empty section (page 13 not listed) is left out.

    Raises: nothing (tests/app/test_classroom.py: SECTIONS names every listed page once)."""
    scripts = {p.name: p.script for p in listed()}
    grouped = {}
    for key, names in SECTIONS:
        members = [pages[scripts[n]] for n in names if scripts.get(n) in pages]
        if members:
            grouped[t(f"classroom.section_{key}", lang)] = members
    return grouped


def build(lang: str) -> dict[str, st.Page]:
    """One st.Page per entry of PAGES (those whose script exists), titled in `lang`, keyed by script path."""
    pages = {}
    for p in listed():
        if (ROOT / p.script).exists():
            pages[p.script] = st.Page(ROOT / p.script, title=title(p, lang), icon=p.icon,
                                      url_path=p.url_path or None, default=not p.url_path)
    return pages


def run() -> None:
    """The entry point's whole job: navigation in this run's language, the chosen page, then previous / next."""
    lang = current_lang()
    pages = build(lang)
    st.session_state[NAV_KEY] = pages
    current = st.navigation(sections(pages, lang), expanded=True)  # every page, under its section
    current.run()
    footer(lang, current, pages)


def footer(lang: str, current: st.Page, pages: dict[str, st.Page]) -> None:
    """Links to the previous and next page of the walkthrough, keeping the language (and presenter mode, which
    lives in the session)."""
    order = [p for p in PAGES if p.script in pages]
    scripts = [p.script for p in order]
    here = next((i for i, s in enumerate(scripts) if pages[s].url_path == current.url_path), None)
    if here is None:
        return
    st.divider()
    left, right = st.columns(2)
    if here > 0:
        prev = order[here - 1]
        left.page_link(pages[prev.script], label=t("classroom.previous", lang, page=title(prev, lang)),
                       icon=":material/arrow_back:", query_params={"lang": lang})
    if here + 1 < len(order):
        nxt = order[here + 1]
        right.page_link(pages[nxt.script], label=t("classroom.next", lang, page=title(nxt, lang)),
                        icon=":material/arrow_forward:", query_params={"lang": lang})


def link(name: str, label: str, lang: str, where=None, query: dict | None = None) -> None:
    """A link to page `name` (a NavPage name) keeping the session: st.page_link through the navigation when the app
    runs from app.py, a plain link to its URL path when a page script runs on its own."""
    page = BY_NAME[name]
    params = {"lang": lang, **(query or {})}
    pages = st.session_state.get(NAV_KEY) or {}
    where = where or st
    if page.script in pages:
        where.page_link(pages[page.script], label=label, icon=page.icon, query_params=params)
    else:
        where.markdown(f"[{label}](/{page.url_path}?{'&'.join(f'{k}={v}' for k, v in params.items())})")


GUIDE_LINK = re.compile(r"\]\((/[^)\s]*)\)")  # a markdown link to a path of this app: [text](/Engine?lang=en&…)
MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\((/[^)\s]*)\)")  # the same, with its text
SAME_TAB_LINK = re.compile(r'<a href="(/[^"\s]*)" target="_self">')  # what same_tab makes of one


def guide_links(markdown: str) -> list[str]:
    """Every app link of a guide, in order ("/Engine?lang=en&steps=3"), as markdown or as same_tab made it."""
    found = re.finditer(f"{GUIDE_LINK.pattern}|{SAME_TAB_LINK.pattern}", markdown)
    return [m.group(1) or html.unescape(m.group(2)) for m in found]


def same_tab(markdown: str) -> str:
    """Every app link as an HTML anchor that opens in the same tab (target="_self"): Streamlit opens a markdown
    link in a new tab, so a lesson would end with a tab per link. Render with unsafe_allow_html=True; the links'
    text stays markdown (emphasis inside still renders). Other links are left as they are."""
    return MARKDOWN_LINK.sub(lambda m: f'<a href="{html.escape(m.group(2))}" target="_self">{m.group(1)}</a>',
                             markdown)


def _with_params(link: str, present: bool) -> str:
    """An app link as the guide page shows it: present=1 added when asked (the guide's links to the model pages
    name their model themselves, `model=shipped`, as their lesson states were written for it)."""
    if not present:
        return link
    path, _, query = link.partition("?")
    return f"{path}?{query}&present=1" if query else f"{path}?present=1"


def guide_markdown(markdown: str, present: bool) -> str:
    """The guide as shown in the app: its first heading dropped (the page has its title), present=1 added to each
    app link when `present`."""
    lines = markdown.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return GUIDE_LINK.sub(lambda m: f"]({_with_params(m.group(1), present)})", "\n".join(lines))
