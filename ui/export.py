"""A download made on click and handed to the browser in the page's own messages.

st.download_button keeps its file in Streamlit's media store, reachable by URL. A file made on click (a callable
`data`) belongs to no session there, and the store's cleanup after every run of *any* session drops such a file
after two runs: with a class stepping, the learner's browser often asks for it too late and gets a 404. Here the
click runs a callback that makes the text and keeps it in session_state; the same run draws a tiny
st.components.v2 script with the text as its data, which saves it as a file (a Blob and an <a download>); the text
is dropped once drawn. Nothing outlives the run, nothing depends on other sessions.
"""

from __future__ import annotations

import secrets
from typing import Callable

import streamlit as st

SAVE_JS = """
export default function (component) {
  const { data } = component;
  const seen = window.__pagedSaved || (window.__pagedSaved = {});
  if (!data || !data.token || seen[data.token]) return;
  seen[data.token] = true;  // drawn again (a rerun, a remount): saved once
  const url = URL.createObjectURL(new Blob([data.text], { type: data.mime }));
  const a = document.createElement('a');
  a.href = url; a.download = data.file_name; a.style.display = 'none';
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
"""

_saver = st.components.v2.component("paged_save", js=SAVE_JS)


def _pending_key(key: str) -> str:
    return f"_save_pending.{key}"


def save_button(label: str, make: Callable[[], str], file_name: str, key: str, where=None,
                mime: str = "application/json") -> None:
    """A button (`key`) that, when pressed, calls make() once and has the browser save its text as `file_name`."""
    def on_click() -> None:
        st.session_state[_pending_key(key)] = {"token": secrets.token_hex(8), "text": make(),
                                              "file_name": file_name, "mime": mime}

    box = where or st.container()
    box.button(label, key=key, on_click=on_click, icon=":material/download:")
    pending = st.session_state.get(_pending_key(key))
    with box:
        _saver(key=f"{key}.save", height=0, data=pending or {})
    if pending is not None:  # drawn: the browser has it (a run stopped before this line draws it again next time)
        st.session_state.pop(_pending_key(key), None)
