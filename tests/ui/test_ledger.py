"""The playback bar's click ledger (ui.ledger): each logged action runs exactly once and in order, however the
browser's values arrive (repeated, cut short, from another page, malformed), and the actions do what the bar says."""

from __future__ import annotations

import pytest
import streamlit as st
from hypothesis import given, strategies as hs

import ui.ledger as ledger
from ui.ledger import MAX_LOG, MAX_PER_MESSAGE, SESSION_KEY, WHOLE_PAGE_KEY, act, apply_log
from ui.playback import Stepper

SESSION = "s1"  # the server session the tests' values were made for


def value(nonce: str, entries: list[tuple[int, str, str]], session: str | None = SESSION, base: int = 0) -> dict:
    """A ledger value as the browser sends it: made after the page met `session` with `base` clicks logged."""
    return {"nonce": nonce, "seq": entries[-1][0] if entries else 0, "log": [list(e) for e in entries],
            "session": session, "base": base}


def apply(v, applied, do, page, extra=()) -> int:
    return apply_log(v, applied, do, page, extra, session=SESSION)


def test_each_action_runs_once_in_order_across_repeated_and_growing_values():
    applied, ran = {}, []
    log = [(1, "step", "p"), (2, "step", "p"), (3, "back", "p")]
    assert apply(value("n1", log[:2]), applied, ran.append, "p") == 2
    assert apply(value("n1", log[:2]), applied, ran.append, "p") == 0  # the same value again: nothing
    assert apply(value("n1", log), applied, ran.append, "p") == 1
    assert ran == ["step", "step", "back"] and applied == {"n1": 3}


@given(hs.lists(hs.sampled_from(["step", "back", "play", "tick"]), max_size=MAX_PER_MESSAGE), hs.data())
def test_any_sequence_of_deliveries_runs_every_action_exactly_once(actions, data):
    """Whatever subset of intermediate values reaches the server (runs cut short), as long as the newest one does,
    the actions run are exactly the ones logged, in order."""
    entries = [(i + 1, a, "p") for i, a in enumerate(actions)]
    cuts = sorted(set(data.draw(hs.lists(hs.integers(0, len(entries)), max_size=6)))) + [len(entries)]
    applied, ran = {}, []
    for cut in cuts:
        apply(value("n", entries[:cut][-MAX_LOG:]), applied, ran.append, "p")
    assert ran == actions


@given(hs.lists(hs.sampled_from(["step", "back", "play", "tick", "p.add"]), max_size=MAX_PER_MESSAGE), hs.data())
def test_a_logged_add_runs_exactly_once_however_the_values_arrive(actions, data):
    """A page's extra button (Add, key "p.add") is logged like a step: whatever values are cut short or arrive twice,
    each Add and each step runs exactly once, in the order clicked."""
    entries = [(i + 1, a, "p") for i, a in enumerate(actions)]
    cuts = sorted(data.draw(hs.lists(hs.integers(0, len(entries)), max_size=8))) + [len(entries), len(entries)]
    applied, ran = {}, []
    for cut in cuts:
        apply(value("n", entries[:cut][-MAX_LOG:]), applied, ran.append, "p", extra=("p.add",))
    assert ran == actions


def test_an_extra_action_runs_only_where_the_page_has_that_button():
    """An action named after a button the page did not give the ledger (another page's Add, junk) is skipped."""
    applied, ran = {}, []
    log = [(1, "q.add", "p"), (2, "p.add", "p"), (3, "p.reset", "p"), (4, ["p.add"], "p"), (5, "p.add", "q")]
    apply(value("n", log), applied, ran.append, "p", extra=("p.add",))
    assert ran == ["p.add"]


def test_other_pages_other_tabs_and_junk_are_skipped():
    applied, ran = {}, []
    apply(value("a", [(1, "step", "gather"), (2, "step", "batch")]), applied, ran.append, "batch")
    apply(value("b", [(1, "back", "batch")]), applied, ran.append, "batch")  # another tab: its own numbering
    for junk in (None, "x", {"nonce": 3}, {"nonce": "c", "log": "x"}, {"nonce": "c", "log": [[1, "rm -rf", "batch"],
                                                                                            ["1", "step", "batch"],
                                                                                            [True, "step", "batch"]]}):
        apply(junk, applied, ran.append, "batch")
    assert ran == ["step", "back"]


def test_an_action_to_retry_that_a_newer_run_stops_runs_again_with_the_next_value():
    """Streamlit stops a run (callbacks too) at a session_state access when a whole-page rerun is asked for: an
    action in `retry` stopped so counts as not applied and runs on the next value, once; the stop goes on up (the
    run must end); an action not in `retry` stays applied (it may have changed something before being stopped)."""
    from streamlit.runtime.scriptrunner import StopException

    applied, ran, stops = {}, [], ["p.export"]

    def do(action: str) -> None:
        if stops and action == stops[0]:
            stops.pop(0)
            raise StopException()
        ran.append(action)

    log = [(1, "tick", "p"), (2, "p.export", "p"), (3, "tick", "p")]
    with pytest.raises(StopException):
        apply_log(value("n", log), applied, do, "p", ("p.export",), session=SESSION, retry=("p.export",))
    assert ran == ["tick"] and applied == {"n": 1}
    assert apply_log(value("n", log), applied, do, "p", ("p.export",), session=SESSION, retry=("p.export",)) == 2
    assert apply_log(value("n", log), applied, do, "p", ("p.export",), session=SESSION, retry=("p.export",)) == 0
    assert ran == ["tick", "p.export", "tick"] and applied == {"n": 3}
    stops.append("tick")
    with pytest.raises(StopException):
        apply_log(value("n", log + [(4, "tick", "p")]), applied, do, "p", session=SESSION, retry=("p.export",))
    assert applied == {"n": 4} and ran == ["tick", "p.export", "tick"]


class Counter:
    """A page whose state is a number from 0 to `end` in session_state."""

    def __init__(self, end: int) -> None:
        self.end = end
        st.session_state["t.n"] = 0

    def move(self, by: int) -> bool:
        now = st.session_state["t.n"]
        st.session_state["t.n"] = max(0, min(self.end, now + by))
        return st.session_state["t.n"] != now

    def stepper(self) -> Stepper:
        return Stepper("t", "t.next", st.session_state["t.n"], True, True,
                       forward=lambda: self.move(1), back=lambda: self.move(-1))


def test_step_back_play_and_ticks():
    page = Counter(end=3)
    st.session_state["_stepper.t"] = page.stepper()
    st.session_state["t.play"] = 0
    act("t", "tick")                       # not playing: a tick does nothing
    assert st.session_state["t.n"] == 0
    act("t", "play")
    assert st.session_state["t.play"] == 1
    for _ in range(5):                     # ticks step until the end, then playing stops by itself
        act("t", "tick")
    assert st.session_state["t.n"] == 3 and st.session_state["t.play"] == 0
    act("t", "play")
    act("t", "back")                       # back pauses and undoes one step
    assert st.session_state["t.n"] == 2 and st.session_state["t.play"] == 0


def test_an_add_while_playing_is_applied_once_and_playing_goes_on():
    """The ledger's Add, logged while the page plays (ticks on either side), adds once, does not pause, and asks for
    the whole page to be drawn (the Add's outcome is drawn outside the step fragment); a repeated value adds
    nothing more."""
    page, added = Counter(end=10), []
    st.session_state["_stepper.t"] = Stepper("t", "t.next", 0, True, False, forward=lambda: page.move(1),
                                             back=lambda: page.move(-1), extra={"t.add": lambda: added.append(1)})
    st.session_state["t.play"] = 1
    st.session_state[SESSION_KEY] = SESSION
    st.session_state.pop(WHOLE_PAGE_KEY, None)
    log = value("tab", [(1, "tick", "t"), (2, "t.add", "t"), (3, "tick", "t")])
    for _ in range(3):  # the same newest value, delivered again by later runs
        st.session_state["t.ledger"] = {"log": log}
        ledger._on_ledger("t")
    assert added == [1] and st.session_state["t.n"] == 2 and st.session_state["t.play"] == 1
    assert st.session_state.pop(WHOLE_PAGE_KEY) is True


def test_an_export_logged_while_playing_is_made_once_and_playing_goes_on():
    """The page's Export (key "t.export"), logged by the ledger between two play ticks, makes its file once (queued
    for the next drawing), does not pause, and asks for the whole page (the button may sit outside the step
    fragment); the same value delivered again makes nothing more."""
    from ui import export

    page, made = Counter(end=10), []
    st.session_state["_stepper.t"] = page.stepper()
    st.session_state[export._maker_key("t.export")] = (lambda: made.append(1) or '{"a": 1}', "t.json", "text/json")
    st.session_state["t.play"] = 1
    st.session_state[SESSION_KEY] = SESSION
    st.session_state.pop(WHOLE_PAGE_KEY, None)
    st.session_state.pop(export.NEXT_KEY, None)
    st.session_state.pop(export._pending_key("t.export"), None)
    log = value("export-tab", [(1, "tick", "t"), (2, "t.export", "t"), (3, "tick", "t")])
    for _ in range(3):
        st.session_state["t.ledger"] = {"log": log}
        ledger._on_ledger("t")
    assert made == [1] and st.session_state["t.n"] == 2 and st.session_state["t.play"] == 1
    (file,) = st.session_state[export._pending_key("t.export")]
    assert file["text"] == '{"a": 1}' and file["file_name"] == "t.json"
    assert st.session_state.pop(WHOLE_PAGE_KEY) is True


def test_an_export_stopped_by_a_whole_page_rerun_is_made_by_the_next_run_once():
    """Issue 35 item 3: a play tick's whole-page run stopped the Export being made (Streamlit stops a callback at its
    next session_state access), and the press, already counted as applied, was lost. Now the run after it makes the
    file, from the same ledger value (a knob's rerun brings no new one: the bar catches up), exactly once."""
    from streamlit.runtime.scriptrunner import RerunException
    from ui import export

    page, made, stop = Counter(end=10), [], [True]

    def make() -> str:  # the page's export() reads session_state: where the stop lands
        if stop and stop.pop():
            raise RerunException(None)
        made.append(1)
        return '{"a": 1}'

    st.session_state["_stepper.t"] = page.stepper()
    st.session_state[export._maker_key("t.export")] = (make, "t.json", "text/json")
    st.session_state["t.play"] = 1
    st.session_state[SESSION_KEY] = SESSION
    st.session_state.pop(export.NEXT_KEY, None)
    st.session_state.pop(export._pending_key("t.export"), None)
    st.session_state["t.ledger"] = {"log": value("stop-tab", [(1, "tick", "t"), (2, "t.export", "t")])}
    with pytest.raises(RerunException):
        ledger._on_ledger("t")
    assert made == [] and export._pending_key("t.export") not in st.session_state
    for _ in range(3):  # the next runs draw the bar; the first makes the file, the others nothing more
        ledger._catch_up("t")
    assert made == [1] and len(st.session_state[export._pending_key("t.export")]) == 1
    assert st.session_state["t.n"] == 1 and st.session_state["t.play"] == 1  # the tick ran once


# --- a reconnect never replays; one value's work is bounded ----------------------------------------------------------
def test_a_fresh_session_runs_only_the_clicks_made_after_the_page_met_it():
    """The tab logged 5 clicks for an old session; it met this session with 5 logged (base 5) and then 1 more click:
    exactly that one runs, on the first value this session sees and on every later one."""
    applied, ran = {}, []
    old = [(i, "step", "p") for i in range(1, 6)]
    assert apply(value("tab", old + [(6, "back", "p")], base=5), applied, ran.append, "p") == 1
    assert apply(value("tab", old + [(6, "back", "p"), (7, "step", "p")], base=5), applied, ran.append, "p") == 1
    assert ran == ["back", "step"]


def test_clicks_made_after_the_page_met_the_session_in_one_value_all_run():
    """Three quick clicks after the page met this session (base 2), arriving in one value: all three run, in order."""
    applied, ran = {}, []
    log = [(1, "step", "p"), (2, "step", "p"), (3, "back", "p"), (4, "play", "p"), (5, "step", "p")]
    assert apply(value("tab", log, base=2), applied, ran.append, "p") == 3 and ran == ["back", "play", "step"]


def test_a_value_made_for_another_session_replays_nothing():
    """A value carrying another session's token (or none: sent before the page knew of this session, e.g. the
    reconnect's first run) counts its whole log as applied; the next click, made for this session, runs alone."""
    for stale in (value("tab", [(1, "step", "p"), (2, "step", "p")], session="old"),
                  value("tab", [(1, "step", "p"), (2, "step", "p")], session=None),
                  {"nonce": "tab", "seq": 2, "log": [[1, "step", "p"], [2, "step", "p"]]}):
        applied, ran = {}, []
        assert apply(stale, applied, ran.append, "p") == 0 and applied == {"tab": 2}
        apply(value("tab", [(1, "step", "p"), (2, "step", "p"), (3, "back", "p")], base=2), applied, ran.append, "p")
        assert ran == ["back"]


def test_a_session_without_a_token_never_trusts_a_base():
    """apply_log called without this session's token (session=None) trusts no base: a first value replays nothing."""
    applied, ran = {}, []
    assert apply_log(value("tab", [(1, "step", "p")], session=None), applied, ran.append, "p") == 0 and ran == []


def test_one_value_runs_at_most_max_per_message_actions():
    """A hand-made value of MAX_LOG new Backs runs MAX_PER_MESSAGE of them (the first, in order); the rest count as
    applied, so the same value sent again runs nothing."""
    applied, ran = {}, []
    log = [(i, "back", "p") for i in range(1, MAX_LOG + 1)]
    assert apply(value("tab", log), applied, ran.append, "p") == MAX_PER_MESSAGE < MAX_LOG
    assert apply(value("tab", log), applied, ran.append, "p") == 0
    assert len(ran) == MAX_PER_MESSAGE and applied == {"tab": MAX_LOG}


def test_actions_past_the_free_ones_are_paced(monkeypatch):
    """paced(): the first FREE calls run back to back; each later one is followed by a sleep of PACE x its own time
    (the clock is the test's: every call takes 10 ms)."""
    clock, slept, ran = [0.0], [], []
    monkeypatch.setattr(ledger.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(ledger.time, "sleep", slept.append)

    def do(action: str) -> None:
        ran.append(action)
        clock[0] += 0.010

    run = ledger.paced(do, free=2, pace=2.0)
    for action in ("step", "back", "step", "back"):
        run(action)
    assert ran == ["step", "back", "step", "back"] and slept == [pytest.approx(0.02), pytest.approx(0.02)]


def test_a_ledger_value_gives_way_before_each_action_but_the_first():
    """paced(..., give_way=g): g runs before the 2nd and 3rd of three actions, never before the first (a lone
    click pays nothing) and never after the last."""
    from ui.ledger import paced

    seen = []
    run = paced(seen.append, free=3, give_way=lambda: seen.append("give way"))
    for action in ("step", "back", "step"):
        run(action)
    assert seen == ["step", "give way", "back", "give way", "step"]


# --- what the bar hands the ledger: the browser script's data, the run's start ---------------------------------------
def test_the_script_is_told_the_bar_s_buttons_the_page_s_extra_buttons_and_its_export(monkeypatch):
    """draw_ledger: the script's data maps each button's CSS class (Streamlit's st-key-<key>, dots made dashes) to its
    action, the bar's three first, then the page's extra buttons and its Export under their own keys."""
    drawn = []
    monkeypatch.setattr(ledger, "_component", lambda **kw: drawn.append(kw))
    stepper = Stepper("t", "t.next", 0, True, True, forward=lambda: True, back=lambda: True,
                      extra={"t.add": lambda: None})
    ledger.draw_ledger(stepper, {"t.back": "back", "t.next": "step", "t.play_pause": "play"}, {" ": "play"},
                       playing=True, interval_ms=500, session="s9")
    (kw,) = drawn
    assert kw["key"] == "t.ledger" and kw["height"] == 0 and kw["default"] == {"log": None}
    data = kw["data"]
    assert list(data["buttons"].items()) == [("st-key-t-back", "back"), ("st-key-t-next", "step"),
                                             ("st-key-t-play_pause", "play"), ("st-key-t-add", "t.add"),
                                             ("st-key-t-export", "t.export")]
    assert data["keys"] == {" ": "play"} and data["playing"] is True and data["interval_ms"] == 500
    assert data["page"] == "t" and data["session"] == "s9"


def test_a_run_starts_by_keeping_the_stepper_and_one_token_per_session():
    """start_run keeps the run's stepper for the next run's callbacks and returns the session's token, the same on
    every run of the session."""
    st.session_state.pop(SESSION_KEY, None)
    first, second = Counter(end=3).stepper(), Counter(end=3).stepper()
    token = ledger.start_run(first)
    assert st.session_state["_stepper.t"] is first and isinstance(token, str) and len(token) == 16
    assert ledger.start_run(second) == token and st.session_state["_stepper.t"] is second
