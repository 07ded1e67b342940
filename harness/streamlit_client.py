"""A Streamlit session spoken by a script: a live class's follower without a browser (many in one thread).

A follower does what Streamlit 1.67's frontend does, as one recorded through bench/ws_tap.py:
  - opens ws://127.0.0.1:PORT/_stcore/stream (subprotocols "streamlit, PLACEHOLDER_AUTH_TOKEN", no extension: the
    server's websocket compression is off) and asks for the first run: rerun_script with query_string join=CODE,
    no page hash, an empty widget_states and the browser's context_info;
  - runs the class listener component as its script does (app_pages/classroom/js.py's LISTENER_JS): an HTTP/1.1
    keep-alive connection asking the server's wait route (server/class_wait.py) with the data of the listener's
    last mount, HAProxy's affinity cookie from the websocket's handshake sent along; an answer with another version
    sends the trigger's rerun (rerun_script with the widget states, the page's query string and script hash, and the
    trigger widget's json_trigger_value, as recorded from Chromium), asking again once a run draws new data;
  - answers each `auto_rerun` (a fragment's run_every, such as the polls of a server without the wait route) as the
    frontend's setInterval: every interval, rerun_script with that fragment_id and is_auto_rerun; a whole run's
    new_session clears the timers, stop_auto_rerun clears one;
  - keeps the widget states the frontend would send (each widget element's value when the server sets it, else
    its default the first time it is seen; dropped when a run's page no longer has it) for the widget kinds the app
    draws (slider, checkbox, text input and area, selectbox, radio, multiselect, pills / segmented control, number
    input, file uploader; buttons send nothing), and the frontend's message cache (metadata.cacheable messages kept,
    ref_hash answered from it, entries older than new_session's max_cached_message_age runs dropped);
  - answers pings. It draws nothing: the server's work per follower is a browser's, the client's is a few
    protobuf parses.
Time stamps are the kernel's (harness/websocket.py: when a message's bytes reached the follower's socket), on
time.time()'s clock. The messages and fields used here are Streamlit's private protocol (Streamlit is pinned
exactly); a Streamlit upgrade is checked by running `python -m bench.class_swarm --swarm` against the app.
"""
from __future__ import annotations

import json
import re
import resource
import selectors
import socket
import sys
import time
from collections.abc import Callable
from urllib.parse import urlencode

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

from harness.websocket import BINARY, CLOSE, PING, PONG, TEXT, Frames, client_frame, connect, read_stamped, set_cookie

FINISHED = ForwardMsg.ScriptFinishedStatus


# ------------------------------------------------------------------------------------------- what the frontend keeps
def _widget_state(kind: str, w, known: bool) -> WidgetState | None:
    """The state the frontend sends for widget element w of this kind (None: it keeps what it has, or sends
    nothing for this kind). The server's value when it sets one, else the default the first time it is seen."""
    state = WidgetState(id=w.id)
    if kind == "file_uploader":
        state.file_uploader_state_value.SetInParent()
        return None if known else state
    if kind not in _VALUE_KINDS or (known and not w.set_value):
        return None
    if kind == "checkbox":
        state.bool_value = w.value if w.set_value else w.default
    elif kind == "slider":
        if w.options:                                         # select_slider: not drawn by the app
            return None
        state.double_array_value.data.extend(w.value if w.set_value else w.default)
    elif kind in ("text_area", "text_input"):
        field = "value" if w.set_value else "default"
        if w.HasField(field):
            state.string_value = getattr(w, field)
    elif kind in ("selectbox", "radio"):
        if w.set_value:
            if w.HasField("raw_value"):
                state.string_value = w.raw_value
        elif w.HasField("default"):
            state.string_value = w.options[w.default]
    elif kind == "multiselect":
        state.string_array_value.data.extend(w.raw_values if w.set_value else [w.options[i] for i in w.default])
    elif kind == "button_group":
        state.string_array_value.data.extend(w.raw_values if w.set_value else
                                             [w.options[i].content for i in w.default])
    elif kind == "number_input":
        field = "value" if w.set_value else "default"
        if w.HasField(field):
            if w.data_type == type(w).INT:
                state.int_value = int(getattr(w, field))
            else:
                state.double_value = getattr(w, field)
    return state


_VALUE_KINDS = {"checkbox", "slider", "text_area", "text_input", "selectbox", "radio", "multiselect",
                "button_group", "number_input"}


class Widgets:
    """The widget states a follower's frontend holds: set from the elements of each run, the ones its page no
    longer draws dropped when a run ends."""

    def __init__(self):
        self.states: dict[str, WidgetState] = {}
        self._seen: set[str] = set()

    def run_started(self) -> None:
        self._seen = set()

    def element(self, element) -> None:
        kind = element.WhichOneof("type")
        w = getattr(element, kind) if kind else None
        widget_id = getattr(w, "id", "") if w is not None else ""
        if not widget_id or not widget_id.startswith("$$ID-"):
            return
        self._seen.add(widget_id)
        state = _widget_state(kind, w, widget_id in self.states)
        if state is not None:
            self.states[widget_id] = state

    def run_finished(self, whole: bool) -> None:
        if whole:
            self.states = {k: v for k, v in self.states.items() if k in self._seen}

    def message(self) -> WidgetStates:
        return WidgetStates(widgets=list(self.states.values()))


class MessageCache:
    """The frontend's ForwardMsg cache: cacheable messages by hash, with the run count they were last used at."""

    def __init__(self):
        self.messages: dict[str, list] = {}          # hash -> [bytes, run count, fragment id]
        self.runs = 0

    def keep(self, msg: ForwardMsg, data: bytes) -> None:
        if msg.metadata.cacheable and msg.hash and msg.hash not in self.messages:
            self.messages[msg.hash] = [data, self.runs, msg.delta.fragment_id if msg.HasField("delta") else ""]

    def resolve(self, ref: ForwardMsg) -> ForwardMsg:
        entry = self.messages[ref.ref_hash]                    # a miss is a protocol error: let it raise
        entry[1] = self.runs
        msg = ForwardMsg()
        msg.ParseFromString(entry[0])
        msg.metadata.CopyFrom(ref.metadata)
        return msg

    def run_finished(self, max_age: int, fragment_ids: list[str]) -> None:
        self.runs += 1
        for key, (_, runs, fragment) in list(self.messages.items()):
            if fragment_ids and (not fragment or fragment not in fragment_ids):
                continue
            if self.runs - runs > max_age:
                del self.messages[key]



# ------------------------------------------------------------------------------------------------ a follower's listener
LISTENER = "atlas_class_listener"        # app_pages/classroom/js.py's component
TRIGGER_ID = "$$STREAMLIT_INTERNAL_KEY_{id}__events"     # a bidi component's trigger widget, as the frontend names it
SHOWN_WAIT_S = 5.0                       # LISTENER_JS: after a trigger, wait this long for the page to show it


class Listener:
    """The follower's listener component as LISTENER_JS runs it: one HTTP/1.1 keep-alive connection that asks the
    server's wait route for the next view; when the answer is a change, the follower sends the trigger's rerun and
    asks again once a run draws the listener with the new version (or after SHOWN_WAIT_S). New data while an ask is
    held aborts it (the browser closes the connection)."""

    def __init__(self, follower: Follower, selector: selectors.BaseSelector):
        self.follower, self.selector = follower, selector
        self.data: dict | None = None
        self.asked: dict | None = None                    # the data of the ask in flight
        self.sock: socket.socket | None = None
        self.reply = b""
        self.due: float | None = None                     # when to ask next (None: an ask is in flight, or no data)
        self.triggered: dict | None = None                # the data a trigger was sent for

    def drawn(self, data: dict) -> None:
        """A run drew the listener with data (the JSON of its mount)."""
        if self.data is None or data != self.data:
            self.data = data
            self.triggered = None
            if self.asked is not None:                    # the in-flight ask is for old data: aborted
                self._close()
            self.due = time.monotonic()

    def _close(self) -> None:
        if self.sock is not None:
            self.selector.unregister(self.sock)
            self.sock.close()
        self.sock, self.asked, self.reply = None, None, b""

    def ask(self) -> None:
        d = self.data
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.follower.port), timeout=30)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.settimeout(None)
            self.selector.register(self.sock, selectors.EVENT_READ, self)
        asked = urlencode({"code": d["code"], "seen": d["seen"], "me": d["me"]})
        cookie = f"Cookie: {self.follower.cookie}\r\n" if self.follower.cookie else ""
        self.sock.sendall(f"GET {d['url']}?{asked} HTTP/1.1\r\nHost: 127.0.0.1:{self.follower.port}\r\n{cookie}"
                          "User-Agent: class_swarm\r\n\r\n".encode())
        self.asked, self.due = d, None
        self.follower.stats["asks"] += 1

    def fire_due(self, now: float) -> float:
        if self.data is not None and self.asked is None and self.due is not None and self.due <= now:
            self.ask()
        return self.due if self.due is not None else now + 3600

    def readable(self) -> bool:
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self._close()
            self.due = time.monotonic() + 1.0
            return True
        self.reply += data
        head, found, body = self.reply.partition(b"\r\n\r\n")
        if not found:
            return True
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        if len(body) < length:
            return True
        self.reply, asked = b"", self.asked
        self.asked = None
        if not head.startswith(b"HTTP/1.1 200"):
            self.due = time.monotonic() + 1.0
            return True
        answer = json.loads(body[:length])
        if asked is not self.data:                        # answered after new data came: ask with the new data
            self.due = time.monotonic()
        elif answer.get("closed") or answer.get("version") != asked["seen"]:
            self.follower.trigger(0 if answer.get("closed") else answer["version"])
            self.triggered = asked
            self.due = time.monotonic() + SHOWN_WAIT_S    # unless a run draws new data first
        else:
            self.due = time.monotonic()
        return True


# ------------------------------------------------------------------------------------------------------ a follower
class Follower:
    """One student's session, as its frontend speaks to the server (the module's docstring). Events go to on_event:
    ("run", start, end, query) for each whole run finished, ("poll", sent, end, status) for each poll answered,
    ("error", text) for an exception drawn or a run that did not finish."""

    def __init__(self, index: int, port: int, query: str, on_event: Callable[..., None],
                 selector: selectors.BaseSelector):
        self.index, self.port, self.on_event = index, port, on_event
        self.query = query
        self.page_hash = ""
        self.widgets = Widgets()
        self.cache = MessageCache()
        self.max_age = 2
        self.timers: dict[str, list[float]] = {}              # fragment id -> [interval, next due]
        self.sent: dict[str, float] = {}                      # fragment id -> when its poll was sent
        self.run_start: float | None = None
        self.run_fragments: list[str] = []
        self.got_new_session = False
        self.in_poll = False
        self.stats = {"polls": 0, "asks": 0, "runs": 0, "poll_bytes": 0, "run_bytes": 0, "messages": 0,
                      "errors": 0, "unstamped_reads": 0}
        self._frames = Frames()
        self.sock, head = connect(port, "/_stcore/stream", "streamlit, PLACEHOLDER_AUTH_TOKEN", "class_swarm")
        self.cookie = set_cookie(head)                        # HAProxy's affinity cookie, sent with the listener's asks
        self.listener = Listener(self, selector)
        self.listener_id = ""                                 # the listener component's element id

    def context(self) -> ContextInfo:
        return ContextInfo(timezone="UTC", timezone_offset=0, locale="en-US", url=f"http://127.0.0.1:{self.port}/",
                           is_embedded=False, color_scheme="light")

    def rerun_message(self, fragment_id: str = "", first: bool = False) -> BackMsg:
        """The rerun_script the frontend sends: its first (a page load), or a fragment's auto-rerun."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.widget_states.CopyFrom(WidgetStates() if first else self.widgets.message())
        state.page_script_hash = "" if first else self.page_hash
        if fragment_id:
            state.fragment_id = fragment_id
            state.is_auto_rerun = True
        state.cached_message_hashes.extend(self.cache.messages)
        state.context_info.CopyFrom(self.context())
        return msg

    def trigger(self, version: int) -> None:
        """The listener's setTriggerValue("changed", version): a whole rerun carrying the trigger's widget state."""
        msg = self.rerun_message()
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = TRIGGER_ID.format(id=self.listener_id)
        state.json_trigger_value = json.dumps([{"event": "changed", "value": version}], separators=(",", ":"))
        self.send(msg)

    def start(self) -> None:
        self.send(self.rerun_message(first=True))

    def send(self, msg: BackMsg, opcode: int = BINARY) -> None:
        self._send_frame(msg.SerializeToString(), opcode)

    def _send_frame(self, payload: bytes, opcode: int) -> None:
        self.sock.sendall(client_frame(payload, opcode))

    # ---------------------------------------------------------------------------------------------- receiving
    def readable(self) -> bool:
        """Read what the socket holds (the select said it is readable); False when the server closed it."""
        data, stamp = read_stamped(self.sock)
        if not data:
            return False
        self.stats["unstamped_reads"] += stamp is None
        for opcode, payload in self._frames.feed(data):
            if opcode == PING:
                self._send_frame(payload, PONG)
            elif opcode == CLOSE:
                self._send_frame(payload[:2], CLOSE)
            elif opcode in (TEXT, BINARY):
                self.on_message(payload, stamp or time.time())
        return True

    def on_message(self, data: bytes, stamp: float) -> None:
        """One ForwardMsg, as the frontend handles it."""
        msg = ForwardMsg()
        msg.ParseFromString(data)
        kind = msg.WhichOneof("type")
        if kind == "new_session":                             # a poll's (a fragment's run) or a whole run's bytes
            self.in_poll = bool(msg.metadata.run.fragment_ids)
        self.stats["messages"] += 1
        self.stats["poll_bytes" if self.in_poll else "run_bytes"] += len(data)
        if kind == "ref_hash":
            msg = self.cache.resolve(msg)
            kind = msg.WhichOneof("type")
        else:
            self.cache.keep(msg, data)
        if kind == "new_session":
            self.got_new_session = True
            self.run_fragments = list(msg.metadata.run.fragment_ids)
            self.max_age = msg.new_session.config.max_cached_message_age or self.max_age
            if not self.run_fragments:                        # a whole run: the frontend clears its timers
                self.timers.clear()
                self.run_start = stamp
                self.page_hash = msg.new_session.page_script_hash
                self.widgets.run_started()
        elif kind == "delta":
            if msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                if element.WhichOneof("type") == "exception":
                    self.stats["errors"] += 1
                    self.on_event("error", f"{element.exception.type}: {element.exception.message}")
                elif element.WhichOneof("type") == "bidi_component":
                    if element.bidi_component.component_name == LISTENER:
                        self.listener_id = element.bidi_component.id
                        self.listener.drawn(json.loads(element.bidi_component.json))
                self.widgets.element(element)
        elif kind == "navigation":                            # st.navigation: the page's own hash
            self.page_hash = msg.navigation.page_script_hash or self.page_hash
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string
        elif kind == "auto_rerun":
            fragment, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
            if fragment and self.timers.get(fragment, [None])[0] != interval:
                self.timers[fragment] = [interval, time.monotonic() + interval]
        elif kind == "stop_auto_rerun":
            for fragment in msg.stop_auto_rerun.fragment_ids:
                self.timers.pop(fragment, None)
        elif kind == "script_finished":
            self._finished(msg, stamp)

    def _finished(self, msg: ForwardMsg, stamp: float) -> None:
        status = msg.script_finished
        fragments = list(msg.metadata.run.fragment_ids)
        if status in (FINISHED.FINISHED_SUCCESSFULLY, FINISHED.FINISHED_FRAGMENT_RUN_SUCCESSFULLY):
            self.widgets.run_finished(whole=not fragments)
        if status != FINISHED.FINISHED_EARLY_FOR_RERUN and self.got_new_session:
            self.cache.run_finished(self.max_age, fragments)
        for fragment in fragments:
            sent = self.sent.pop(fragment, None)
            if sent is not None:
                self.stats["polls"] += 1
                self.on_event("poll", sent, stamp, FINISHED.Name(status))
        if not fragments:
            if status == FINISHED.FINISHED_SUCCESSFULLY and self.run_start is not None:
                self.stats["runs"] += 1
                self.on_event("run", self.run_start, stamp, self.query)
            elif status != FINISHED.FINISHED_EARLY_FOR_RERUN:
                self.on_event("error", f"a run ended {FINISHED.Name(status)}")
            self.run_start = None
        self.run_fragments = []

    def fire_due(self, now: float) -> float:
        """Send the polls that are due (the frontend's setInterval: one send per tick, late ticks not caught up) and
        the listener's ask; the next due time."""
        nearest = self.listener.fire_due(now)
        for fragment, timer in self.timers.items():
            if timer[1] <= now:
                self.sent.setdefault(fragment, time.time())
                self.send(self.rerun_message(fragment))
                timer[1] += timer[0]
                if timer[1] <= now:
                    timer[1] = now + timer[0]
            nearest = min(nearest, timer[1])
        return nearest


def swarm(port: int, code: str, n: int, lang: str | None, join_gap_s: float, out) -> None:
    """N followers joining class `code` one every join_gap_s, in this thread, until stdin closes. Writes to out one
    line per event: `ready`, `run I START END QUERY`, `poll I SENT END STATUS`, `error I TEXT`, then `summary JSON`."""
    query = urlencode({"join": code, **({"lang": lang} if lang else {})})
    selector = selectors.DefaultSelector()
    followers: list[Follower] = []
    first_runs: set[int] = set()

    def emit(index: int, kind: str, *values) -> None:
        if kind == "run":
            first_runs.add(index)
        out.write(" ".join([kind, str(index), *(f"{v:.6f}" if isinstance(v, float) else " ".join(str(v).split())
                                                for v in values)])
                  + "\n")

    selector.register(sys.stdin, selectors.EVENT_READ, None)
    started, ready, next_join = time.monotonic(), False, time.monotonic()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    while True:
        now = time.monotonic()
        if len(followers) < n and now >= next_join:
            index = len(followers)
            follower = Follower(index, port, query, lambda kind, *v, i=index: emit(i, kind, *v), selector)
            selector.register(follower.sock, selectors.EVENT_READ, follower)
            followers.append(follower)
            follower.start()
            next_join = now + join_gap_s
        if not ready and len(first_runs) == n:
            ready = True
            out.write(f"ready {time.monotonic() - started:.3f}\n")
        wake = min([f.fire_due(now) for f in followers] + [next_join if len(followers) < n else now + 3600])
        out.flush()
        for key, _ in selector.select(max(0.0, wake - time.monotonic())):
            if key.data is None:
                if not sys.stdin.readline():
                    cpu = resource.getrusage(resource.RUSAGE_SELF)
                    totals = {k: sum(f.stats[k] for f in followers) for k in followers[0].stats} if followers else {}
                    totals["cpu_s"] = cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime
                    totals["wall_s"] = time.monotonic() - started
                    out.write("summary " + json.dumps(totals) + "\n")
                    out.flush()
                    for f in followers:
                        f.sock.close()
                    return
            elif not _read(key.data):
                selector.unregister(key.fileobj)
                key.data.timers.clear()
                emit(key.data.index, "error", "the server closed the websocket")


def _read(follower: Follower) -> bool:
    try:
        return follower.readable()
    except OSError:
        return False


