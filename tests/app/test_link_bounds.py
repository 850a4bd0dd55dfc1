"""What one link may ask for: a `steps=` beyond MAX_LINK_STEPS opens the engine page at MAX_LINK_STEPS, with the
link-notes box naming the value and the clamp (never a silent change)."""

from __future__ import annotations

from lessons.engine_requests import RequestSpec, encode_requests
from ui.params import MAX_LINK_STEPS

from .app_util import app_test

ENGINE = "app_pages/4_Engine.py"


def test_a_link_asking_for_more_steps_is_clamped_with_a_note():
    """steps=600 on a session long enough to reach it: the page stops at MAX_LINK_STEPS and says so."""
    specs = [RequestSpec("the quick brown fox", max_tokens=128, at_step=60 * i) for i in range(6)]
    at = app_test(ENGINE, params={"reqs": encode_requests(specs), "steps": 600}).run(timeout=120)
    assert not at.exception
    assert len(at.session_state["engine.lesson"].steps) == MAX_LINK_STEPS < 600
    notes = [w.value for w in at.warning if "steps" in w.value]
    assert notes and "600" in notes[0] and str(MAX_LINK_STEPS) in notes[0]
