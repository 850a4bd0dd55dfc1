"""UI strings: every key of every strings module has non-empty English and 简体中文 with the same format fields, every
module in ui/strings/ is registered, and every literal key a page asks for exists."""

from __future__ import annotations

import pkgutil
import re
import string
from pathlib import Path

import pytest

import ui.strings as i18n
from ui.strings import LANGS, MODULES, normalize_lang, strings, t, translator

ROOT = Path(__file__).resolve().parents[2]


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("module", MODULES)
def test_every_key_has_both_languages(module):
    """No key is missing a language or left empty, and en/zh use the same {fields}."""
    for key, texts in strings(module).items():
        assert set(texts) == set(LANGS), f"{module}.{key} has languages {sorted(texts)}"
        for lang in LANGS:
            assert isinstance(texts[lang], str) and texts[lang].strip(), f"{module}.{key} [{lang}] is empty"
        assert _fields(texts["en"]) == _fields(texts["zh"]), f"{module}.{key}: en/zh format fields differ"


def test_every_strings_module_is_registered():
    """A strings file dropped into ui/strings/ without adding it to MODULES would never be checked."""
    files = {m.name for m in pkgutil.iter_modules(i18n.__path__)}
    assert files == set(MODULES), f"unregistered: {files - set(MODULES)}, missing: {set(MODULES) - files}"


def test_t_formats_and_falls_back():
    """t fills fields; an unknown language falls back to English; an unknown key or module raises KeyError."""
    assert t("common.err_negative", "en", item=-1) == "Physical block -1 is negative."
    assert t("common.err_negative", "zh", item=-1) != t("common.err_negative", "en", item=-1)
    assert t("home.title", "fr") == t("home.title", "en")
    assert normalize_lang(None) == "en" and normalize_lang("zh") == "zh"
    with pytest.raises(KeyError):
        t("common.no_such_key", "en")
    with pytest.raises(KeyError):
        t("nosuchmodule.title", "en")


def test_translator_reads_own_module_and_common():
    tr = translator("address", "zh")
    assert tr("title") == t("address.title", "zh")
    assert tr("common.reset") == t("common.reset", "zh")


LITERAL_KEY = re.compile(r"""ctx\.t\(\s*["']([A-Za-z0-9_.]+)["']""")
SETUP = re.compile(r"""(?:setup_page|page_header)\(\s*["'](\w+)["']""")


def _page_sources():
    return sorted((ROOT / "app_pages").glob("*.py"))  # app.py is only the navigation (ui.nav): no page strings


@pytest.mark.parametrize("path", _page_sources(), ids=lambda p: p.name)
def test_literal_keys_used_by_pages_exist(path):
    """Every ctx.t("key") written literally in a page names an existing key (its own module or module.key)."""
    source = path.read_text(encoding="utf-8")
    setup = SETUP.search(source)
    if setup is None:
        pytest.skip(f"{path.name} calls neither ui.setup_page nor ui.page_header")
    module = setup.group(1)
    for key in LITERAL_KEY.findall(source):
        full = key if "." in key else f"{module}.{key}"
        mod, _, name = full.partition(".")
        assert name in strings(mod), f"{path.name} asks for missing key {full!r}"


def test_each_page_reads_the_strings_module_named_as_its_nav_entry():
    """One name per page: the strings module a page script sets up with is its ui.nav name (page 8: "guide"), and
    that module has the page's title."""
    from ui.nav import PAGES
    for page in PAGES:
        setup = SETUP.search((ROOT / page.script).read_text(encoding="utf-8"))
        assert setup is not None and setup.group(1) == page.name, (page.script, setup and setup.group(1))
        assert "title" in strings(page.name), page.name


def test_pickers_of_a_sequence_use_the_tables_word_for_it():
    """Every label that asks for a sequence says it as the tables' column does (简体中文 "序列"; the state rule's
    picker said "Sequence" in English)."""
    for key in ("chain.rule_pick", "batch.which"):
        assert t(key, "zh") == t("engine.col_seq", "zh"), key
