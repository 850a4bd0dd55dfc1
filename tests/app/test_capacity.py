"""Beyond PAGED_MAX_SESSIONS connected learners a new session gets the "server full" page in its language, not the
app; once a place frees up, Try again lets it in, and an admitted session is never turned away later."""

from __future__ import annotations

import pytest

import ui.capacity as capacity
from ui.strings import t

from .app_util import APP, app_test


@pytest.fixture
def two_taken(monkeypatch):
    """A limit of 2 with two other sessions admitted and connected (the set of connected ids is the test's)."""
    monkeypatch.setenv("PAGED_MAX_SESSIONS", "2")
    connected = {"other-a", "other-b"}
    monkeypatch.setattr(capacity, "_connected_ids", lambda: connected | {capacity._this_session()})
    capacity._admitted.clear()
    capacity._admitted().ids.update({"other-a", "other-b"})
    yield connected
    capacity._admitted.clear()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_full_server_says_so_in_the_learners_language(two_taken, lang):
    """Two places, both taken: the third session sees the full page's title and text (naming the limit) in its
    language, a Try again button and no page of the app."""
    at = app_test(APP, lang=lang).run()
    assert not at.exception
    assert [x.value for x in at.title] == [t("capacity.title", lang)]
    assert at.info[0].value == t("capacity.text", lang, max_sessions=2)
    assert at.button(key="capacity.retry")
    assert capacity.ADMITTED_KEY not in at.session_state


def test_try_again_gets_in_once_a_place_frees_and_stays_in(two_taken):
    """One of the two others leaves: Try again shows the app; when the server is full again, this session, already
    admitted, still gets the app."""
    at = app_test(APP).run()
    assert at.title[0].value == t("capacity.title", "en")
    two_taken.discard("other-b")
    at.button(key="capacity.retry").click().run()
    assert not at.exception and t("capacity.title", "en") not in [x.value for x in at.title]
    capacity._admitted().ids.add("other-c")
    two_taken.add("other-c")
    at.run()
    assert t("capacity.title", "en") not in [x.value for x in at.title]


@pytest.mark.parametrize("raw", ["0", "-3", "lots", "１２"])
def test_a_bad_limit_is_named_not_ignored(monkeypatch, raw):
    """PAGED_MAX_SESSIONS that is not a whole number >= 1 is an error box naming the variable and the value."""
    monkeypatch.setenv("PAGED_MAX_SESSIONS", raw)
    at = app_test(APP).run()
    assert not at.exception and "PAGED_MAX_SESSIONS" in at.error[0].value and repr(raw) in at.error[0].value


def test_new_sessions_first_runs_wait_their_turn(two_taken, monkeypatch):
    """With a real runtime (faked), a newcomer's first run waits until the gate is free (the last first run's time
    x NEW_SESSION_PACE after it ended), and moves the gate on; its later runs do not wait."""
    two_taken.discard("other-a")
    two_taken.discard("other-b")
    slept = []
    monkeypatch.setattr(capacity, "_wait", slept.append)
    capacity._gate.clear()
    capacity._gate().free_at = capacity.time.monotonic() + 30.0  # a newcomer just finished a long first run
    at = app_test(APP).run()
    assert not at.exception and len(slept) == 1 and 29.0 < slept[0] <= 30.0
    assert capacity._gate().free_at > capacity.time.monotonic()  # this first run pushed the gate on
    at.run()
    assert len(slept) == 1, "a later run came to the gate"
    capacity._gate.clear()
