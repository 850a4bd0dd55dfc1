"""Classroom mode through AppTest: the navigation entry point (translated page names, the old URL paths), presenter
mode (?present=1 and the sidebar toggle), and the playback bar of every stepping page: Back lands exactly where a
fresh replay to that step lands, Play and its speed round-trip through the URL, and the buttons carry their
keyboard shortcuts."""

from __future__ import annotations

import pytest

from lessons.batch import BatchConfig, BatchLesson
from lessons.engine import EngineLesson
from ui import nav
from ui.nav import PAGES, title
from ui.strings import t

from .app_util import APP, app_test, no_exception

GATHER, BATCH = "app_pages/2_Gather_and_attend.py", "app_pages/3_Batch_decode.py"
ENGINE, BUGLAB, SHARING = "app_pages/4_Engine.py", "app_pages/5_Bug_lab.py", "app_pages/6_Sharing.py"


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def click(at, key: str, times: int = 1):
    for _ in range(times):
        at.button(key=key).click().run()
    no_exception(at)
    return at


def without_timings(value):
    """A trace with every measured time taken out (the only thing two replays may differ in)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("elapsed_ms",)}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


# --- navigation --------------------------------------------------------------------------------------------------
def test_every_page_keeps_the_url_path_share_links_already_use():
    """Listed in order 1..12 (the guide, page 8, right after 7), each at the path share links already use."""
    assert [p.url_path for p in PAGES if p.url_path] == [
        "Address_translation", "Gather_and_attend", "Batch_decode", "Engine", "Bug_lab", "Sharing",
        "Correct_to_fast", "Teaching_guide", "Beam_search", "Swap_or_recompute", "Sliding_window",
        "Speculative_decoding"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_navigation_numbers_what_it_lists_in_the_order_it_lists_it(monkeypatch, lang):
    """Home, then 1, 2, … with none skipped and none unnumbered (page 13 last when PAGED_EXERCISES is set), and
    each title's number is its script's number (app_pages/8_Teaching_guide.py is "8 · …")."""
    monkeypatch.setenv("PAGED_EXERCISES", "/some/folder")
    pages = nav.listed()
    numbers = [title(p, lang).split(" · ")[0] for p in pages[1:]]
    assert numbers == [str(n) for n in range(1, len(pages))], numbers
    assert all(p.script.split("/")[-1].startswith(f"{n}_") for n, p in zip(numbers, pages[1:]))


def test_the_sections_hold_every_listed_page_once_in_the_listed_order(monkeypatch):
    """The sidebar's sections (Start, the core path 1-4, …) read top to bottom give exactly the listed order, which
    the previous / next links walk."""
    monkeypatch.setenv("PAGED_EXERCISES", "/some/folder")
    flat = [name for _, names in nav.SECTIONS for name in names]
    assert flat == [p.name for p in nav.listed()]
    assert dict(nav.SECTIONS)["core"] == nav.CORE_PATH == ("address", "gather", "batch", "engine")
    for key, _ in nav.SECTIONS:
        assert t(f"classroom.section_{key}", "en") != t(f"classroom.section_{key}", "zh"), key


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_sidebar_shows_the_sections_in_the_sessions_language(monkeypatch, lang):
    """st.navigation gets the sections: their titles in the session's language, Home first, then the core path
    under its own title."""
    seen = []
    real = nav.st.navigation

    def record(pages, **kwargs):
        seen.append(pages)
        return real(pages, **kwargs)

    monkeypatch.setattr(nav.st, "navigation", record)
    at = app_test(APP, lang).run()
    no_exception(at)
    grouped = seen[-1]
    assert list(grouped)[:2] == [t("classroom.section_start", lang), t("classroom.section_core", lang)]
    assert [page.title for page in grouped[t("classroom.section_start", lang)]] == [t("classroom.nav_home", lang)]
    assert [page.title for page in grouped[t("classroom.section_core", lang)]] == [
        title(nav.BY_NAME[name], lang) for name in nav.CORE_PATH]


def test_previous_and_next_follow_the_listed_order_through_the_guide():
    """Page 7's next is 8 · Teacher's guide, whose previous is 7 and next 9 (the guide used to be last)."""
    at = app_test(APP).run()
    at.switch_page("app_pages/7_Correct_to_fast.py").run()
    labels = [link.proto.label for link in at.get("page_link")]
    assert t("classroom.next", "en", page="8 · Teacher's guide") in labels, labels
    at.switch_page("app_pages/8_Teaching_guide.py").run()
    no_exception(at)
    labels = [link.proto.label for link in at.get("page_link")]
    assert t("classroom.previous", "en", page="7 · Correct → fast") in labels
    assert t("classroom.next", "en", page="9 · Beam search") in labels


def test_the_entry_point_runs_home_and_names_pages_in_the_sessions_language():
    """app.py (st.navigation) runs the home page; page names come from ui/strings in the session's language, the
    home page included (never the file name "app"); a page reached through it shows previous / next links."""
    at = app_test(APP, "zh").run()
    no_exception(at)
    assert at.title[0].value == t("home.title", "zh")
    titles = [title(page, "zh") for page in PAGES]
    assert titles[0] == "首页" and t("classroom.nav_batch", "zh") in titles and "app" not in titles
    at.switch_page("app_pages/3_Batch_decode.py").run()
    no_exception(at)
    assert at.title[0].value == t("batch.title", "zh")
    labels = [link.proto.label for link in at.get("page_link")]
    assert t("classroom.next", "zh", page=t("classroom.nav_engine", "zh")) in labels


# --- presenter mode ----------------------------------------------------------------------------------------------
def test_presenter_mode_from_the_link_and_off_with_the_toggle():
    at = app_test(BATCH, params={"present": 1}).run()
    no_exception(at)
    assert at.session_state["_present"] is True and at.query_params["present"] == "1"
    assert at.toggle(key="_present_widget").value is True
    styles = " ".join(h.proto.body for h in at.get("html"))
    assert "font-size: 20px" in styles  # body text >= 20 px
    assert any("paged-counter" in m.value for m in at.markdown), "a large step counter"
    at.toggle(key="_present_widget").set_value(False).run()
    no_exception(at)
    assert "present" not in at.query_params
    assert "font-size: 20px" not in " ".join(h.proto.body for h in at.get("html"))


def test_presenter_mode_figures_have_large_text():
    """Every text of every figure on the batch page is >= 16 px in presenter mode (ticks, legends, cell labels);
    titles are page text above the figures (they wrap instead of being cut at the figure's edge)."""
    import json

    at = app_test(BATCH, params={"present": 1}).run()
    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        layout = fig["layout"]
        assert layout["font"]["size"] >= 16 and not (layout.get("title") or {}).get("text")
        for trace in fig["data"]:
            if "text" in trace.get("mode", "") and trace.get("textfont", {}).get("size") is not None:
                sizes = trace["textfont"]["size"]
                assert min(sizes if isinstance(sizes, list) else [sizes]) >= 16, trace.get("name")
    titles = [m.value for m in at.markdown if "paged-figure-title" in m.value]
    assert any(t("batch.mapping_title", "en").split(":")[0] in title for title in titles)
    # the pool and the mapping are HTML (viz.pool.pool_html, viz.mapping.mapping_html): presenter mode's cell rules
    # apply to them (16 px text, cells up to 44 px, fewer where the grid's columns would not fit one line; the
    # mapping image at full width)
    bodies = [h.proto.body for h in at.get("html")]
    assert any('class="pp-grid"' in b for b in bodies) and any("pm-tip" in b for b in bodies)
    styles = " ".join(b for b in bodies if b.startswith("<style>"))
    assert ".paged-pool { font-size: 16px !important;" in styles and "var(--pp-span, 20) - 1px), 44px)" in styles
    assert ".paged-pool .pc-plot { max-width: none !important; }" in styles


# --- playback: back lands where a fresh replay lands -------------------------------------------------------------
def test_batch_back_equals_a_fresh_replay_of_the_shorter_log():
    at = click(app_test(BATCH, params={"num_blocks": 24}).run(), "batch.decode", 3)
    at.text_input(key="batch.new_len").input("6").run()
    click(at, "batch.add")
    click(at, "batch.back")
    demo = at.session_state["batch.lesson"]
    assert demo.ops == ["d", "d", "d"] and at.query_params["ops"] == "d,d,d"
    fresh, _ = BatchLesson.replay(BatchConfig(num_blocks=24), ["d", "d", "d"])
    assert demo.trace() == fresh.trace()
    click(at, "batch.back", 3)
    assert at.session_state["batch.lesson"].trace() == BatchLesson(BatchConfig(num_blocks=24)).trace()
    assert at.button(key="batch.back").disabled


def test_engine_back_equals_a_fresh_replay_to_that_step():
    at = click(app_test(ENGINE).run(), "engine.step", 4)
    click(at, "engine.back")
    demo = at.session_state["engine.lesson"]
    assert len(demo.steps) == 3 and at.query_params["steps"] == "3"
    fresh = EngineLesson.replay(demo.config, demo.all_specs(), 3, *_model())
    assert without_timings(demo.trace()) == without_timings(fresh.trace())


def _model():
    from paged.model import load_model
    return load_model()


@pytest.mark.parametrize("page, step_key, state_key", [
    (GATHER, "gather.next", "gather.step"), (BUGLAB, "buglab.next", "buglab.step")])
def test_index_pages_step_and_back(page, step_key, state_key):
    at = app_test(page, params={"step": 2}).run()
    prefix = step_key.split(".")[0]
    click(at, step_key, 2)
    assert at.session_state[state_key] == 4
    click(at, f"{prefix}.back")
    assert at.session_state[state_key] == 3 and at.query_params["step"] == "3"


def test_sharing_back_undoes_a_step():
    at = click(app_test(SHARING).run(), "sharing.step", 2)
    click(at, "sharing.back")
    assert len(at.session_state["sharing.lesson"].steps) == 1 and at.query_params["steps"] == "1"


# --- play, speed, shortcuts --------------------------------------------------------------------------------------
def test_play_and_speed_round_trip_through_the_url():
    at = app_test(BATCH, params={"play": 1, "speed": 2}).run()
    no_exception(at)
    assert at.session_state["batch.play"] == 1 and at.query_params["play"] == "1"
    assert at.selectbox(key="batch.speed").value == "2" and at.query_params["speed"] == "2"
    assert at.button(key="batch.play_pause").proto.label == t("classroom.pause", "en")
    click(at, "batch.play_pause")
    assert at.session_state["batch.play"] == 0 and at.query_params["play"] == "0"
    assert at.button(key="batch.play_pause").proto.label == t("classroom.play", "en")


def test_playing_stops_at_the_end():
    """A link that says play on a finished gather (step = context_len) shows Play, not Pause, and play=0."""
    at = app_test(GATHER, params={"play": 1, "step": 10}).run()
    no_exception(at)
    assert at.session_state["gather.play"] == 0 and at.query_params["play"] == "0"
    assert at.button(key="gather.play_pause").disabled


@pytest.mark.parametrize("page, step_key", [(GATHER, "gather.next"), (BATCH, "batch.decode"),
                                            (ENGINE, "engine.step"), (BUGLAB, "buglab.next"),
                                            (SHARING, "sharing.step")])
def test_every_stepping_page_has_the_bar_with_shortcuts(page, step_key):
    at = app_test(page).run()
    no_exception(at)
    prefix = step_key.split(".")[0]
    buttons = {key: at.button(key=key).proto for key in (step_key, f"{prefix}.back", f"{prefix}.play_pause")}
    assert [b.shortcut for b in buttons.values()] == ["right", "left", "space"]
    assert "→" in buttons[step_key].help and "←" in buttons[f"{prefix}.back"].help
