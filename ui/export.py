"""A download made on click and handed to the browser in the page's own messages.

st.download_button keeps its file in Streamlit's media store, reachable by URL. A file made on click (a callable
`data`) belongs to no session there, and the store's cleanup after every run of *any* session drops such a file
after two runs: with a class stepping, the learner's browser often asks for it too late and gets a 404. Here the
click runs a callback that makes the text and keeps it in session_state; the same run draws a tiny
st.components.v2 script with the text as its data, which saves it as a file (a Blob and an <a download>); the text
is dropped once drawn. Nothing outlives the run, nothing depends on other sessions.

Never lost, never twice. On a page with a playback bar the Export button (key "<prefix>.export") is logged by the
bar's ledger like Step and Add (ui.ledger): a click that a play tick's run cut short is still applied, exactly
once. Both ways end in `press(key)`, which makes the file with the maker the button's last run stored. Files made
before the next run draws them queue (at most MAX_PENDING); each carries its own token, saved once by the browser.

Bounded work. Export is one long action (the JSON of a long session: ~2 MB, ~0.1 s at step 300): before making it,
a press gives way to another learner's run under way (ui.capacity.yielding_run, at most GIVE_WAY_S), and after an
export that took d seconds the session's next one first sleeps PACE x d, so presses without pause hold the
interpreter at most a third of the time, as the ledger's paced actions do; and one session's exports begin at least
MIN_GAP_S apart, since each also costs a run of its page and the sending of its file (a made file is cheap: ~3 ms
at step 300 on page 4, whose steps' texts are kept, but its page's run and 1 MB sent are not).
"""

from __future__ import annotations

import secrets
import time
from typing import Callable

import streamlit as st

SAVE_JS = """
export default function (component) {
  const { data } = component;
  const seen = window.__pagedSaved || (window.__pagedSaved = {});
  for (const file of (data && data.files) || []) {
    if (!file || !file.token || seen[file.token]) continue;
    seen[file.token] = true;  // drawn again (a rerun, a remount): saved once
    const url = URL.createObjectURL(new Blob([file.text], { type: file.mime }));
    const a = document.createElement('a');
    a.href = url; a.download = file.file_name; a.style.display = 'none';
    document.body.appendChild(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }
}
"""

_saver = st.components.v2.component("paged_save", js=SAVE_JS)


DRAWS = 3           # runs that send a made file (the browser saves each token once)
MAX_PENDING = 8     # files made but not yet drawn, per button (a burst inside one run); older ones dropped past it
PACE = 2.0          # after an export that took d seconds, the session's next export first sleeps PACE x d
MIN_GAP_S = 0.5     # ...and starts at least this long after the last began (its run and its sending cost too)
MAX_PACE_S = 2.0    # ...at most this long
GIVE_WAY_S = 0.5    # before making its file, a press waits at most this long for another learner's run
NEXT_KEY = "_save_next"  # session_state: time.monotonic() before which this session's next export sleeps


def _pending_key(key: str) -> str:
    return f"_save_pending.{key}"


def _maker_key(key: str) -> str:
    return f"_save_maker.{key}"


def press(key: str, give_way: Callable[[float], object] | None = None) -> bool:
    """Button `key` pressed: make its file with the maker its last run stored and queue it for the next drawing
    (see "Bounded work"); `give_way(max_s)`: how to wait for other learners' runs (default: yielding_run's).
    Returns False when no such button was drawn in this session.

    Raises: nothing of its own; make()'s errors propagate as a button callback's would."""
    spec = st.session_state.get(_maker_key(key))
    if spec is None:
        return False
    if give_way is None:
        from .capacity import yielding_run

        with yielding_run() as wait_turn:
            return _make(key, spec, wait_turn)
    return _make(key, spec, give_way)


def _make(key: str, spec: tuple, give_way: Callable[[float], object]) -> bool:
    make, file_name, mime = spec
    give_way(GIVE_WAY_S)
    rest = st.session_state.get(NEXT_KEY, 0.0) - time.monotonic()
    if rest > 0:
        time.sleep(min(rest, MAX_PACE_S))
    began = time.perf_counter()
    text = make()
    took = time.perf_counter() - began
    st.session_state[NEXT_KEY] = time.monotonic() + max(PACE * took, MIN_GAP_S - took)
    pending = st.session_state.setdefault(_pending_key(key), [])
    pending.append({"token": secrets.token_hex(8), "text": text, "file_name": file_name, "mime": mime})
    del pending[:-MAX_PENDING]
    return True


def save_button(label: str, make: Callable[[], str], file_name: str, key: str, where=None,
                mime: str = "application/json") -> None:
    """A button (`key`) that, when pressed, calls make() once and has the browser save its text as `file_name`
    (a press logged by a playback bar's ledger too, see the module docstring).

    Raises: nothing of its own."""
    st.session_state[_maker_key(key)] = (make, file_name, mime)  # what the next press (either way) makes
    box = where or st.container()
    box.button(label, key=key, on_click=press, args=(key,), icon=":material/download:")
    pending = st.session_state.get(_pending_key(key))
    with box:
        _saver(key=f"{key}.save", height=0, data={"files": pending} if pending else {})
    if pending:  # drawn DRAWS times, then dropped: a run that follows at once (a play tick) can replace the
        # component's data before the browser ran it, so the next runs send it again (the browser saves a
        # token once; a run stopped before this line draws them again next time)
        for file in pending:
            file["draws"] = file.get("draws", 0) + 1
        kept = [f for f in pending if f["draws"] < DRAWS]
        if kept:
            st.session_state[_pending_key(key)] = kept
        else:
            st.session_state.pop(_pending_key(key), None)
