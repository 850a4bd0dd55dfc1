"""Page 9 · Beam search through AppTest: loads in both languages, steps through the tree (a fork, a copy-on-write,
a prune, the K beams equal the twin's), the break-it shows the corruption, the quiz asks about the next step, and
the URL replays the step."""

from __future__ import annotations

import pytest

from ui.strings import t

from .app_util import app_test, no_exception

BEAM = "app_pages/9_Beam_search.py"


def texts(at) -> str:
    return " ".join(e.value for kind in ("info", "warning", "success", "error") for e in getattr(at, kind))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_loads_in_both_languages(lang):
    """The page draws its title, the pool, the tree, the memory and the savings figures, without an error box."""
    at = app_test(BEAM, lang).run()
    no_exception(at)
    assert at.title[0].value == t("beam.title", lang)
    assert not at.error, [e.value for e in at.error]
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(titles) == 4


def test_stepping_shows_fork_copy_prune_and_the_twin_agrees():
    """The default search, stepped to the end: a fork, a copy-on-write and a prune are announced on the way, and
    the K beams equal the contiguous twin's."""
    at = app_test(BEAM, params={"step": 2}).run()
    seen = texts(at)
    while not at.button(key="beam.next").disabled:
        at.button(key="beam.next").click().run()
        no_exception(at)
        seen += texts(at)
    assert at.session_state["beam.step"] == 9  # 2 prompt chunks, then 7 decodes up to max_tokens 8
    for key in ("fork_msg", "cow_msg", "prune_msg"):
        head = t(f"beam.{key}", "en").split("{")[0]
        assert head in seen, key
    assert t("beam.twin_ok", "en") in seen and not at.error
    assert at.query_params["step"] == str(at.session_state["beam.step"])


def test_skip_cow_corrupts_and_is_caught_by_the_twin():
    """With the copy-on-write skipped, the page names the shared block written and reports the twin mismatch."""
    at = app_test(BEAM, params={"skip_cow": 1, "step": 9}).run()
    no_exception(at)
    errors = " ".join(e.value for e in at.error)
    assert t("beam.twin_bad", "en").split("{")[0] in errors


def test_quiz_asks_about_the_next_step():
    """?quiz=1 shows a question about the next step; after the last step there is none."""
    at = app_test(BEAM, params={"quiz": 1, "step": 2}).run()
    no_exception(at)
    assert at.radio(key="quiz.beam.choice.1") is not None
    at = app_test(BEAM, params={"quiz": 1, "step": 9}).run()
    no_exception(at)
    assert any(t("quiz.none_beam", "en") in c.value for c in at.caption)
