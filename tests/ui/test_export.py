"""ui.export.save_button: the text is made only when the button is pressed, handed to the browser in that run's
own messages (the saver's data), and dropped once drawn; no media file is involved."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest


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
    data = _saver_data(at)
    assert at.session_state["made"] == 1 and json.loads(data["text"]) == {"step": 1}
    assert data["file_name"] == "x.json" and data["mime"] == "application/json" and len(data["token"]) == 16
    at.run()
    assert _saver_data(at) == {} and at.session_state["made"] == 1 and not at.get("download_button")
    at.button(key="t.export").click().run()
    again = _saver_data(at)
    assert json.loads(again["text"]) == {"step": 2} and again["token"] != data["token"]
