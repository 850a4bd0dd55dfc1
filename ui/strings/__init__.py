"""UI strings in English and 简体中文.

Every key lives in one module of this package, one module per page (`home.py`, `address.py`, …) plus `common.py`
for strings several pages share. A module is a plain dict `STRINGS = {key: {"en": …, "zh": …}}`.

Keys are addressed as "<module>.<key>", e.g. ``t("address.title", "zh")``. The module part is the file name, so
adding a page's strings is one file plus its name in `MODULES` below; `tests/ui/test_strings.py` fails if a module in
this folder is not registered, or if any key lacks a non-empty translation.

Strings may hold `str.format` fields (``"token {token_index}"``); `t(key, lang, **fmt)` fills them. The vocabulary
of the seed article (block_size, block_table, physical_block_id, …) stays in English in both languages, exactly as
the article writes it.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import import_module
from typing import Callable

LANGS = ("en", "zh")
LANG_NAMES = {"en": "English", "zh": "简体中文"}
DEFAULT_LANG = "en"

# One entry per strings module. Adding a page: create ui/strings/<name>.py with STRINGS and add "<name>" here.
MODULES = ("common", "classroom", "home", "address", "gather", "batch", "buglab", "engine", "sharing", "fast", "chain",
           "breaks", "quiz", "beyond", "model", "guide", "engine_fault", "vllm", "capacity", "beam",
           "swap", "window", "spec", "exercises", "a11y")


@lru_cache(maxsize=None)
def strings(module: str) -> dict[str, dict[str, str]]:
    """The STRINGS dict of one registered module (KeyError for an unregistered one)."""
    if module not in MODULES:
        raise KeyError(f"i18n module {module!r} is not registered; add it to ui.strings.MODULES {MODULES}")
    return import_module(f"{__name__}.{module}").STRINGS


def normalize_lang(lang: str | None) -> str:
    """A supported language code; anything else falls back to English."""
    return lang if lang in LANGS else DEFAULT_LANG


def t(key: str, lang: str = DEFAULT_LANG, **fmt) -> str:
    """The text of "<module>.<key>" in `lang`, with `fmt` filled in.

    Raises KeyError for an unknown key (a programming error that the page tests catch).
    """
    module, _, name = key.partition(".")
    table = strings(module)
    if name not in table:
        raise KeyError(f"no i18n key {key!r} (module ui/strings/{module}.py)")
    text = table[name][normalize_lang(lang)]
    return text.format(**fmt) if fmt else text


def translator(module: str, lang: str) -> Callable[..., str]:
    """A `t` bound to one module and language: ``tr("title")`` is ``t("<module>.title", lang)``; a key that
    already names its module (``tr("common.reset")``) is looked up as is."""
    strings(module)  # fail early on an unregistered module

    def tr(key: str, **fmt) -> str:
        full = key if "." in key else f"{module}.{key}"
        return t(full, lang, **fmt)

    return tr
