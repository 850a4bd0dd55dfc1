"""One name per action (issue 38): the step button of every stepping page carries the same label in
each language, the one ui/strings/classroom.py holds ("Next step" / "下一步"), not a page's own word
for it."""

from __future__ import annotations

import pytest

from ui.strings import t

from .app_util import PAGES_DIR, app_test, no_exception

# each stepping page and the key of its step button (the playback bar's, ui.playback)
STEP_BUTTONS = {
    "2_Gather_and_attend": "gather.next", "3_Batch_decode": "batch.decode",
    "4_Engine": "engine.step", "5_Bug_lab": "buglab.next", "6_Sharing": "sharing.step",
    "9_Beam_search": "beam.next",
    "10_Swap_or_recompute": "swap.step_btn", "11_Sliding_window": "window.step_btn",
    "12_Speculative_decoding": "spec.step",
}


def test_every_page_with_a_playback_bar_is_checked():
    """The list above names every page that draws a playback bar (itself or via engine_controls)."""
    drawing = {p.stem for p in PAGES_DIR.glob("*.py")
               if "playback_bar(" in (text := p.read_text("utf-8")) or "engine_controls(" in text}
    assert drawing == set(STEP_BUTTONS)


def test_the_step_name_differs_between_languages_only():
    """One English and one Chinese name, and they are not the same text (a missing translation)."""
    assert t("classroom.step", "en") == "Next step"
    assert t("classroom.step", "zh") not in ("", t("classroom.step", "en"))


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("stem", list(STEP_BUTTONS))
def test_the_step_button_has_one_name_on_every_page(stem, lang):
    """The page's step button, as drawn, is labelled classroom.step in the page's language."""
    at = app_test(PAGES_DIR / f"{stem}.py", lang).run()
    no_exception(at)
    assert at.button(key=STEP_BUTTONS[stem]).label == t("classroom.step", lang)
