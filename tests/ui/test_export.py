"""ui.export.save_button: the text is made only when the button is pressed, handed to the browser in that run's
own messages (the saver's data), and dropped once drawn; no media file is involved."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from ui import export


def _page():
    import json

    import streamlit as st

    from ui.export import save_button

    def make() -> str:
        st.session_state["made"] = st.session_state.get("made", 0) + 1
        return json.dumps({"step": st.session_state["made"]})

    save_button("Export", make, "x.json", key="t.export")


def _saver_data(at: AppTest) -> dict:
    (saver,) = [e for e in at.get("bidi_component") if e.proto.component_name == "paged_save"]
    return json.loads(saver.proto.json)


def test_the_text_is_made_on_click_sent_once_and_dropped():
    """Loading and rerunning make nothing; a click makes the text once and that run's saver carries it (with a fresh
    token and the file name); the next run's saver is empty again, and no media-backed download button is drawn."""
    at = AppTest.from_function(_page).run()
    at.run()
    assert "made" not in at.session_state and _saver_data(at) == {}
    at.button(key="t.export").click().run()
    (data,) = _saver_data(at)["files"]
    assert at.session_state["made"] == 1 and json.loads(data["text"]) == {"step": 1}
    assert data["file_name"] == "x.json" and data["mime"] == "application/json" and len(data["token"]) == 16
    for _ in range(export.DRAWS - 1):  # sent again on the next runs, the same token: the browser saves it once
        at.run()
        assert [f["token"] for f in _saver_data(at)["files"]] == [data["token"]]
    at.run()
    assert _saver_data(at) == {} and at.session_state["made"] == 1 and not at.get("download_button")
    at.button(key="t.export").click().run()
    (again,) = _saver_data(at)["files"]
    assert json.loads(again["text"]) == {"step": 2} and again["token"] != data["token"]


def test_presses_without_pause_are_paced(monkeypatch):
    """An export that took d seconds makes the session's next export first sleep PACE x d (the work of presses
    without pause is bounded, as the ledger's is), and one that took almost nothing starts MIN_GAP_S after the last
    began; one pressed after a pause does not sleep. Each press queues its own file until drawn, at most
    MAX_PENDING."""
    import streamlit as st

    from ui import export

    clock, slept = [100.0], []

    def sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    took = [0.1]  # each export takes 0.1 s

    def make() -> str:
        clock[0] += took[0]
        return "{}"

    monkeypatch.setattr(export.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(export.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(export.time, "sleep", sleep)
    for key in (export.NEXT_KEY, export._pending_key("p.export")):
        st.session_state.pop(key, None)
    st.session_state[export._maker_key("p.export")] = (make, "p.json", "application/json")
    no_wait = lambda max_s: 0.0  # noqa: E731
    assert export.press("p.export", no_wait) and slept == []
    assert export.press("p.export", no_wait)
    assert slept == [pytest.approx(max(export.PACE * 0.1, export.MIN_GAP_S - 0.1))]
    took[0] = 0.001  # a cheap export: the gap, not the pace, holds the next one back
    assert export.press("p.export", no_wait) and export.press("p.export", no_wait)
    assert slept[-1] == pytest.approx(export.MIN_GAP_S - 0.001) and export.MIN_GAP_S - 0.001 > export.PACE * 0.001
    took[0] = 0.1
    clock[0] += 10  # a pause
    before = len(slept)
    assert export.press("p.export", no_wait) and len(slept) == before
    for _ in range(export.MAX_PENDING):
        export.press("p.export", no_wait)
    pending = st.session_state[export._pending_key("p.export")]
    assert len(pending) == export.MAX_PENDING and len({f["token"] for f in pending}) == export.MAX_PENDING
    assert not export.press("q.export", no_wait)  # never drawn in this session: nothing made
