"""Every classic bug of paged.faults has its card (title, what, where, symptom, caught_by) and its notice in English
and 简体中文, and the bug lab's intro counts the bugs from len(Fault) rather than a number written by hand."""

import re

from paged.faults import FAULTS, Fault
from ui.strings.buglab import STRINGS

FIELDS = ("title", "what", "where", "symptom", "caught_by", "notice")


def test_every_fault_has_its_text_and_notice_in_both_languages():
    """A fault added to the catalogue without its strings (either language, or its notice) fails here."""
    assert set(FAULTS) == set(Fault)
    for fault in Fault:
        for field in FIELDS:
            entry = STRINGS.get(f"{field}_{fault.value}")
            assert entry is not None, f"no {field}_{fault.value}"
            assert entry["en"].strip() and entry["zh"].strip(), f"{field}_{fault.value} is empty in a language"
        assert STRINGS[f"title_{fault.value}"]["en"] == FAULTS[fault].title  # one English source: the catalogue
        assert re.search(r"[\u4e00-\u9fff]", STRINGS[f"what_{fault.value}"]["zh"]), f"{fault.value}: no Chinese"


def test_the_intro_counts_the_faults():
    """The intro names len(Fault) in both languages, and no spelled-out count is left in it."""
    intro = STRINGS["intro"]
    assert intro["en"].startswith(f"{len(Fault)} classic") and intro["zh"].startswith(f"{len(Fault)} 个")
    words = ("eight", "nine", "seven", "八", "九", "七")
    assert not any(w in intro["en"].lower() or w in intro["zh"] for w in words)
