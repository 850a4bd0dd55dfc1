"""Page 13 · Your turn: absent unless the server names a folder (PAGED_EXERCISES); with one, the
learner's check, its first broken link marked, and the pictures drawn from their code."""

from __future__ import annotations

import pytest

from paged.exercises.workspace import init_workspace
from ui import nav

from .app_util import PAGES_DIR, app_test, no_exception

PAGE = PAGES_DIR / "13_Your_turn.py"


def test_without_the_variable_the_page_is_not_in_the_navigation(monkeypatch):
    monkeypatch.delenv("PAGED_EXERCISES", raising=False)
    assert nav.EXERCISES_PAGE not in nav.listed()
    monkeypatch.setenv("PAGED_EXERCISES", "/some/folder")
    assert (
        nav.listed()[-1] is nav.EXERCISES_PAGE
        and nav.title(nav.EXERCISES_PAGE, "zh") == "13 · 轮到你了"
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_run_on_its_own_without_the_variable_it_only_says_how_to_switch_it_on(monkeypatch, lang):
    monkeypatch.delenv("PAGED_EXERCISES", raising=False)
    at = app_test(PAGE, lang).run()
    no_exception(at)
    assert "PAGED_EXERCISES" in at.info[0].value
    assert not at.dataframe


@pytest.mark.slow
def test_the_reference_is_all_green_and_the_engine_is_drawn(tmp_path, monkeypatch):
    init_workspace(tmp_path, solution=True)
    monkeypatch.setenv("PAGED_EXERCISES", str(tmp_path))
    at = app_test(PAGE).run(timeout=400)
    no_exception(at)
    assert "All 10 exercises pass" in at.success[0].value
    verdicts = at.dataframe[0].value
    assert list(verdicts["passed"]) == ["yes"] * 10
    texts = at.dataframe[1].value
    assert list(texts["your engine"]) == list(texts["contiguous twin"])
    assert set(texts["same"]) == {"yes"}
    assert len(at.get("plotly_chart")) == 2  # the learner's chain and the pool


@pytest.mark.slow
def test_a_mistake_is_marked_and_an_edit_is_picked_up_on_the_next_run(tmp_path, monkeypatch):
    init_workspace(tmp_path, solution=True)
    path = tmp_path / "block_manager.py"
    good = path.read_text()
    path.write_text(
        good.replace(
            "        self.free_block_ids.extend(freed)\n        seq.block_table = []",
            "        self.free_block_ids.extend(freed)",
        )
    )
    monkeypatch.setenv("PAGED_EXERCISES", str(tmp_path))
    at = app_test(PAGE, "zh").run(timeout=400)
    no_exception(at)
    assert "block_manager" in at.error[0].value
    assert ":red-background[block_table]" in " ".join(m.value for m in at.markdown)
    assert ":red-background[" not in " ".join(m.value for m in at.markdown).replace(
        ":red-background[block_table]", ""
    )  # one link marked
    path.write_text(good)  # the learner fixes it and saves; the next run checks again
    at.run(timeout=400)
    no_exception(at)
    assert at.success and not at.error
