"""One simulated learner: a Streamlit session driven over the server's websocket, as the browser drives it.

    session = WsSession("ws://127.0.0.1:8501/_stcore/stream", "Engine")
    await session.open()
    await session.load()                  # the page's first run (what opening /Engine does)
    ms = await session.click("engine.step")   # one rerun with that button's trigger set; ms: send -> script_finished
    await session.close()

What the browser's bundle does (streamlit 1.67, read from its frontend and `streamlit.web.server.starlette`):
  - it opens `/_stcore/stream` with the subprotocols ["streamlit", <xsrf token or "PLACEHOLDER_AUTH_TOKEN">]; the
    server ignores the token unless an auth cookie is present;
  - every run is a BackMsg `rerun_script` (a ClientState): the URL's query string, the page (its name, taken from
    the URL path, on the first run; the hash the server named after that), the widget states with a clicked
    button's `trigger_value` set, the hashes of the big messages it has cached, and a ContextInfo;
  - the server answers with `new_session`, `navigation` (the drawn page's own script hash, to send from then on),
    deltas (widgets carry an id that ends in "-<key>"), `page_info_changed` when the page writes st.query_params,
    and `script_finished`; FINISHED_EARLY_FOR_RERUN means another run of the same chain follows (a callback's or
    st.rerun's), any other status ends the click;
  - a delta the client already holds (its hash was sent back) comes as a `ref_hash` and is read from the cache;
  - a widget drawn inside an st.fragment comes in a delta carrying that fragment's id; a click on it sends the id
    as the ClientState's `fragment_id`, and the server reruns only that fragment (what it drew outside stays).
Unlike the browser this client sends only the widget states it sets; the server keeps every other widget's value
from the previous run, so the page sees the same state.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

SUBPROTOCOLS = ["streamlit", "PLACEHOLDER_AUTH_TOKEN"]
RUN_TIMEOUT_S = 120.0  # one rerun that takes longer than this is reported as an error, never waited on forever
MAX_CACHED = 2000  # big messages kept for ref_hash lookups (the browser also bounds its cache)


@dataclass
class RunOutput:
    """What one run (a chain of script runs ended by script_finished) sent: its widgets by key, its markdown
    text, how many exception elements it drew, and its final status."""
    widgets: dict[str, tuple[str, object]] = field(default_factory=dict)  # key -> (element kind, its proto)
    fragments: dict[str, str] = field(default_factory=dict)  # key -> id of the fragment that drew it ("": none)
    markdown: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    status: int | None = None


class WsSession:
    """One browser tab on one page of a running Streamlit server (see the module docstring)."""

    def __init__(self, url: str, page_name: str, query_string: str = ""):
        if not url.startswith("ws://"):
            raise ValueError(f"url must be a ws:// address, got {url!r}")
        self.url, self.page_name, self.query_string = url, page_name, query_string
        self.page_hash = ""  # known after the first new_session
        self.ws = None
        self.cache: dict[str, ForwardMsg] = {}
        self.last = RunOutput()  # the last finished run
        self.finished_runs = 0  # script_finished messages that ended a run (the end of a click)
        self._current = RunOutput()
        self._done: asyncio.Future | None = None
        self._reader: asyncio.Task | None = None

    async def open(self) -> None:
        """Connect (loopback, no compression: the server's default has none)."""
        from websockets.asyncio.client import connect

        self.ws = await connect(self.url, subprotocols=SUBPROTOCOLS, compression=None, max_size=None,
                                proxy=None, open_timeout=30)
        self._reader = asyncio.create_task(self._read())

    async def close(self) -> None:
        """Disconnect; safe to call twice or after a failed open."""
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):  # the reader ends with the connection either way
                pass
            self._reader = None
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    # --- runs -----------------------------------------------------------------------------------------------------
    async def load(self) -> float:
        """The page's first run, as opening its URL does; returns ms from send to script_finished."""
        return await self.rerun([])

    async def click(self, key: str) -> float:
        """Click the button with this key (as drawn by the last run); ms from send to script_finished."""
        return await self.rerun([WidgetState(id=self.widget_id(key), trigger_value=True)], self.fragment_of(key))

    async def set_slider(self, key: str, value: float) -> float:
        """Move the slider with this key to `value`; ms from send to script_finished."""
        return await self.rerun([WidgetState(id=self.widget_id(key), double_array_value={"data": [value]})],
                                self.fragment_of(key))

    def widget(self, key: str) -> object:
        """The proto of the widget with this key drawn by the last run; KeyError (naming what was drawn) if none."""
        if key not in self.last.widgets:
            raise KeyError(f"no widget with key {key!r} on page {self.page_name!r}; "
                           f"it drew {sorted(self.last.widgets)}")
        return self.last.widgets[key][1]

    def widget_id(self, key: str) -> str:
        return self.widget(key).id

    def fragment_of(self, key: str) -> str:
        """The id of the st.fragment that drew the widget with this key ("" when the page body drew it)."""
        self.widget(key)
        return self.last.fragments.get(key, "")

    async def rerun(self, states: list[WidgetState], fragment_id: str = "") -> float:
        """Send one rerun_script (of the fragment `fragment_id` only, when given) and wait for the script_finished
        that ends it; returns ms (send -> finished). Raises RuntimeError if a run is already in flight on this
        session, TimeoutError after RUN_TIMEOUT_S."""
        if self.ws is None:
            raise RuntimeError("open() the session first")
        if self._done is not None and not self._done.done():
            raise RuntimeError("a rerun is already in flight on this session")
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query_string
        cs.widget_states.widgets.extend(states)
        if fragment_id:
            cs.fragment_id = fragment_id
        if self.page_hash:
            cs.page_script_hash = self.page_hash
        else:
            cs.page_name = self.page_name
        cs.cached_message_hashes.extend(self.cache)
        cs.context_info.timezone, cs.context_info.locale = "UTC", "en-US"
        cs.context_info.url = f"http://{self.url.split('/')[2]}/{self.page_name}"
        # a fragment's rerun redraws only that fragment: the widgets drawn outside it are kept
        self._current = RunOutput({k: v for k, v in self.last.widgets.items()
                                   if self.last.fragments.get(k, "") != fragment_id},
                                  fragments={k: f for k, f in self.last.fragments.items() if f != fragment_id}) \
            if fragment_id else RunOutput()
        self._done = asyncio.get_running_loop().create_future()
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        await asyncio.wait_for(asyncio.shield(self._done), RUN_TIMEOUT_S)
        return (time.perf_counter() - start) * 1000

    # --- what the server sends ------------------------------------------------------------------------------------
    async def _read(self) -> None:
        try:
            async for data in self.ws:
                msg = ForwardMsg()
                msg.ParseFromString(data)
                self._handle(msg)
        except Exception as err:  # a dropped connection fails the click in flight instead of hanging it
            if self._done is not None and not self._done.done():
                self._done.set_exception(ConnectionError(f"websocket closed: {err!r}"))
            raise
        if self._done is not None and not self._done.done():
            self._done.set_exception(ConnectionError("websocket closed by the server"))

    def _handle(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            if msg.ref_hash not in self.cache:
                raise RuntimeError(f"server referred to a message this client never cached: {msg.ref_hash}")
            msg, kind = self.cache[msg.ref_hash], "delta"
        elif msg.metadata.cacheable and msg.hash and len(self.cache) < MAX_CACHED:
            self.cache[msg.hash] = msg
        if kind == "new_session":  # the main script's hash when the app has pages: `navigation` follows
            self.page_hash = msg.new_session.page_script_hash
        elif kind == "navigation":  # the page actually drawn (pages/ and st.navigation apps)
            self.page_hash = msg.navigation.page_script_hash
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            self._element(msg.delta.new_element, msg.delta.fragment_id)
        elif kind == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
            self._current.status = msg.script_finished
            self.last = self._current
            self.finished_runs += 1
            if self._done is not None and not self._done.done():
                self._done.set_result(msg.script_finished)

    def _element(self, element, fragment_id: str = "") -> None:
        kind = element.WhichOneof("type")
        proto = getattr(element, kind) if kind else None
        if kind == "markdown":
            self._current.markdown.append(proto.body)
        elif kind == "exception":
            self._current.exceptions.append(f"{proto.type}: {proto.message}")
        widget_id = getattr(proto, "id", "") if proto is not None else ""
        parts = widget_id.split("-", 2) if isinstance(widget_id, str) else []
        if len(parts) == 3 and parts[0] == "$$ID":
            self._current.widgets[parts[2]] = (kind, proto)
            self._current.fragments[parts[2]] = fragment_id
