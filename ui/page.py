"""Page setup shared by every page: language (sidebar switch, session_state, `?lang=`), page config, device badge."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from typing import Callable

import streamlit as st
import torch

from ui.strings import LANG_NAMES, LANGS, normalize_lang, translator
from paged.kv_cache import default_device

from .params import NOTES_BOX_KEY, Knobs
from .present import inject_css, present_mode, presenter_toggle

# Everything loaded by now (torch, plotly, streamlit, the model code: most of the heap, never garbage) leaves the
# collector's view, so the automatic collections that remain (.streamlit/config.toml turns off Streamlit's full
# collection after every run) stay short. Runs once, when this module is first imported.
gc.freeze()

LANG_KEY = "_lang"                # the language, kept for the whole browser session
LANG_WIDGET_KEY = "_lang_widget"  # the sidebar radio that edits it


@dataclass
class PageContext:
    """What a page needs after setup: its language and a translator bound to its strings module."""

    module: str
    lang: str
    tr: Callable[..., str] = field(repr=False)
    present: bool = False  # presenter mode (ui.present)

    def t(self, key: str, **fmt) -> str:
        """Shorthand for ctx.tr(key, **fmt): "key" in the page's module, "common.key" elsewhere."""
        return self.tr(key, **fmt)


def current_lang() -> str:
    """The session's language: set by the sidebar switch, else taken once from `?lang=`, else English."""
    if LANG_KEY not in st.session_state:
        st.session_state[LANG_KEY] = normalize_lang(st.query_params.get("lang"))
    return st.session_state[LANG_KEY]


def _on_lang_change() -> None:
    st.session_state[LANG_KEY] = normalize_lang(st.session_state[LANG_WIDGET_KEY])


def language_switch(lang: str) -> None:
    """English / 简体中文 radio in the sidebar; the choice persists across pages (session_state)."""
    st.session_state[LANG_WIDGET_KEY] = lang
    st.sidebar.radio("Language / 语言", LANGS, format_func=LANG_NAMES.get, key=LANG_WIDGET_KEY, horizontal=True,
                     on_change=_on_lang_change)


def configure_torch() -> None:
    """The app's tensors are tiny: one intra-op thread avoids thread wake-up costs that dominate at these sizes
    (a 2-thread pool on a busy 2-core machine took ~8 ms per tiny op vs ~5 µs with one). Override with
    PAGED_TORCH_THREADS."""
    want = int(os.environ.get("PAGED_TORCH_THREADS", "1"))
    if torch.get_num_threads() != want:
        torch.set_num_threads(want)


def setup_page(module: str, icon: str = ":material/menu_book:") -> PageContext:
    """Call first on every page: page config (title from ui/strings/<module>.py; `icon` a ":material/…:" icon),
    language switch, presenter mode, torch threads. Returns the PageContext with the translator."""
    configure_torch()
    lang = current_lang()
    present = present_mode()
    tr = translator(module, lang)
    st.set_page_config(page_title=f"{tr('title')} · paged", page_icon=icon, layout="wide",
                       initial_sidebar_state="collapsed" if present else "auto")
    language_switch(lang)
    presenter_toggle(lang, present)
    inject_css(present, lang)
    st.session_state[NOTES_BOX_KEY] = st.container()  # the link's unusable values are listed here (sync_url)
    return PageContext(module, lang, tr, present)


def page_intro(ctx: PageContext) -> None:
    """The page's intro caption ("intro" of its strings); in presenter mode folded into a closed
    expander, so the playback bar and the key figure start on the first screen (the teacher says
    what the intro says). Raises: nothing."""
    if ctx.present:
        st.expander(ctx.t("common.about_page"), icon=":material/info:").caption(ctx.t("intro"))
    else:
        st.caption(ctx.t("intro"))


def key_figure_slot(ctx: PageContext):
    """In presenter mode, an empty container here, for the page's playback bar and key figure
    (`playback_bar(…, where=slot)`, `(slot or st).columns(…)`): the figure then comes before the
    step's other messages and controls. Else None: all is drawn where it always was.
    Raises: nothing."""
    return st.container() if ctx.present else None


def page_header(module: str, icon: str) -> tuple[PageContext, Knobs]:
    """The opening every lesson page shares: `setup_page`, the page's Knobs (URL prefix `module`), its title and
    intro caption (ui/strings/<module>.py "title", "intro") and the sidebar's settings header. Returns (ctx, knobs)."""
    ctx = setup_page(module, icon=icon)
    knobs = Knobs(module)
    st.title(ctx.t("title"))
    page_intro(ctx)
    st.sidebar.header(ctx.t("common.settings"))
    return ctx, knobs


@st.cache_resource(show_spinner=False)
def device_info() -> dict[str, str]:
    """Immutable facts about the compute device (cached for the process)."""
    device = default_device()
    info = {"device": device.type, "torch": torch.__version__}
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
    return info


def device_badge(ctx: PageContext, dtype: str | None = None, where=None) -> None:
    """A one-line badge: device (cuda/cpu, GPU name), dtype when given, torch version."""
    info = device_info()
    parts = [f":blue-badge[:material/memory: {info['device']}" + (f" · {info['name']}" if "name" in info else "") + "]"]
    if dtype:
        parts.append(f":violet-badge[{dtype}]")
    parts.append(f":gray-badge[torch {info['torch']}]")
    (where or st).markdown(f"{ctx.t('common.device')} " + " ".join(parts))
