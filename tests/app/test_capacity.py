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
    start = capacity.time.monotonic()
    free_at = capacity._gate().free_at = start + 30.0  # a newcomer just finished a long first run
    at = app_test(APP).run()
    end = capacity.time.monotonic()
    # it waits from the moment it asks until free_at: between the run's start and its end (a loaded machine's
    # AppTest start can take seconds)
    assert not at.exception and len(slept) == 1 and free_at - end <= slept[0] <= free_at - start
    assert capacity._gate().free_at > capacity.time.monotonic()  # this first run pushed the gate on
    at.run()
    assert len(slept) == 1, "a later run came to the gate"
    capacity._gate.clear()


def _newcomer_run(monkeypatch, busy) -> tuple[list[float], list[set]]:
    """One newcomer's first run of the app with `busy(call_number)` answering "is an established run under way";
    returns the polls it waited (seconds each) and the newcomer sets it asked about."""
    slept, asked = [], []
    monkeypatch.setattr(capacity, "_wait", slept.append)
    monkeypatch.setattr(capacity, "established_run_busy", lambda newcomers: asked.append(set(newcomers)) or
                        busy(len(asked)))
    capacity._gate.clear()
    at = app_test(APP).run()
    assert not at.exception and at.title and t("capacity.title", "en") not in [x.value for x in at.title]
    assert capacity._gate().newcomers == set()  # it left the newcomers once drawn
    capacity._gate.clear()
    return [x for x in slept if x > 0], asked  # (the gate's own wait is for no time: no newcomer ran before)


def test_a_newcomers_first_run_gives_way_to_established_runs(two_taken, monkeypatch):
    """Before it starts and before each element its first run sends, a newcomer asks whether an established
    learner's run is under way (never counting itself), and waits in polls of YIELD_POLL_S while one is: here a
    run is under way at its start (3 polls) and again after its 30th element (3 polls)."""
    two_taken.clear()
    polls, asked = _newcomer_run(monkeypatch, lambda n: n in (1, 2, 3, 30, 31, 32))
    assert polls == [capacity.YIELD_POLL_S] * 6
    assert len(asked) > 25, "the run's elements did not give way"  # one look per element sent
    assert len({frozenset(ids) for ids in asked}) == 1 and len(asked[0]) == 1, "the newcomer must count as one"


def test_a_newcomer_gives_way_for_max_yield_s_at_most(two_taken, monkeypatch):
    """A class clicking without pause (always busy) holds a newcomer back MAX_YIELD_S in all, then it draws."""
    two_taken.clear()
    monkeypatch.setattr(capacity, "MAX_YIELD_S", 10 * capacity.YIELD_POLL_S)
    polls, _ = _newcomer_run(monkeypatch, lambda n: True)
    assert set(polls) == {capacity.YIELD_POLL_S} and len(polls) in (10, 11)  # float steps: 10, or one more
