"""A live class with many followers on one server, without a browser per follower.

bench/bench_class_follow.py runs a headless Chromium per student, which stops at ~10 on 2 cores. Here one headless
Chromium teacher (presenter mode, a class started, layers stepped with ArrowUp / ArrowDown as bench_class_follow
does) and N followers that speak Streamlit's websocket protocol themselves (`--swarm`: one process, one thread, raw
sockets). A follower does what Streamlit 1.67's frontend does, as one recorded through bench/ws_tap.py:
  - opens ws://127.0.0.1:PORT/_stcore/stream (subprotocols "streamlit, PLACEHOLDER_AUTH_TOKEN", no extension: the
    server's websocket compression is off) and asks for the first run: rerun_script with query_string join=CODE,
    no page hash, an empty widget_states and the browser's context_info;
  - runs the class listener component as its script does (app_pages/_class_js.py's LISTENER_JS): an HTTP/1.1
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
Time stamps are the kernel's (SO_TIMESTAMPNS: when a message's bytes reached the follower's socket), on the same
clock as the teacher's tap (time.time()): a swarm late to read its sockets does not make the server look slow.

For each N in --followers, prints:
  idle      the server's CPU over --idle-s seconds with the teacher alone and with N followers waiting:
            (difference) / N / seconds = one idle follower's share of a core (its held ask, answered every 5 s: the
            heartbeat), and a poll's round trip (rerun_script sent to its script_finished received) p50 / p95 when
            the server has followers poll;
  teacher   the server's time for the teacher's page run (its key's rerun request received to the run's end sent,
            bench_class_follow's tap), and the teacher's view time (the key pressed to the new layer on the teacher's
            screen: one Chromium, so a fair number here), medians over --steps, alone and with N followers;
  cpu       the server's CPU-seconds per follower per teacher change: the phase's CPU less the teacher's alone and
            less N idle followers' cost over the phase's length;
  served    per change, from the end of the teacher's page run (as the server sent it) to each follower's rerun of
            the new view received (script_finished), p50 / p95 / max; and a follower's own rerun (its new_session
            to its script_finished) p50.
and the swarm's own CPU (it shares the machine's cores with the server).

Run (from the repository root): python -m bench.class_swarm [--followers 10 30 60] [--idle-s 20] [--steps 6]
[--lang de] [--join-gap-s 0.1] [--replicas 2]   (2: the README's deployment, two replicas sharing Redis behind HAProxy,
on this machine's cores; the teacher on the first replica, the followers through the proxy)
The followers alone, against a server with a class open (a protocol check; one line per event on stdout):
python -m bench.class_swarm --swarm PORT CODE N [--lang de]
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import resource
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

from bench.ws_tap import TO_SERVER, WebSocketTap, shut_both

ROOT = Path(__file__).resolve().parents[1]
SO_TIMESTAMPNS = 35                 # linux/asm-generic/socket.h (Python's socket module does not name it)
TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA
FINISHED = ForwardMsg.ScriptFinishedStatus
STRIP_JS = """() => (document.querySelector('.st-key-class_strip') || {}).textContent || ''"""


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


# ----------------------------------------------------------------------------------------------- websocket frames
def read_stamped(sock: socket.socket) -> tuple[bytes, float | None]:
    """What the socket holds, and when its last bytes reached the socket (the kernel's stamp, SO_TIMESTAMPNS on;
    None when it gave none)."""
    data, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(16))
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
            seconds, nanos = struct.unpack("qq", value[:16])
            return data, seconds + nanos * 1e-9
    return data, None


class Frames:
    """A server's websocket frames (never masked) from the bytes as they come: whole messages (opcode, payload),
    control frames as they are."""

    def __init__(self):
        self._buffer = bytearray()
        self._parts: list[bytes] = []
        self._opcode = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buffer, out = self._buffer, []
        buffer += data
        while len(buffer) >= 2:
            n, at = buffer[1] & 0x7F, 2
            if n >= 126:
                at = 4 if n == 126 else 10
                if len(buffer) < at:
                    break
                n = int.from_bytes(buffer[2:at], "big")
            if len(buffer) < at + n:
                break
            fin, opcode, payload = buffer[0] & 0x80, buffer[0] & 0x0F, bytes(buffer[at:at + n])
            del buffer[:at + n]
            if opcode >= CLOSE:
                out.append((opcode, payload))
                continue
            if opcode:                                        # a message's first frame
                self._opcode, self._parts = opcode, []
            self._parts.append(payload)
            if fin:
                out.append((self._opcode, b"".join(self._parts)))
                self._parts = []
        return out


class StampedTap(WebSocketTap):
    """bench/ws_tap.py's tap, its server's messages stamped by the kernel (when they reached the tap's socket)
    instead of when its thread, sharing the cores with a busy server, got to forward them; bytes forwarded as they
    come."""

    def _frames(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        if direction == TO_SERVER:
            super()._frames(source, sink, direction)
            return
        source.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        frames = Frames()
        try:
            while True:
                data, stamp = read_stamped(source)
                if not data:
                    return
                sink.sendall(data)
                for opcode, payload in frames.feed(data):
                    if opcode < CLOSE:
                        self.on_message(direction, stamp or time.time(), opcode, payload)
        except OSError:
            return
        finally:
            shut_both(source, sink)


# ------------------------------------------------------------------------------------------------ a follower's listener
LISTENER = "atlas_class_listener"        # app_pages/_class_js.py's component
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
        self.cookie = ""                                      # HAProxy's affinity cookie, sent with the listener's asks
        self.sock = self._connect()
        self.listener = Listener(self, selector)
        self.listener_id = ""                                 # the listener component's element id

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        host = f"127.0.0.1:{self.port}"
        sock.sendall((f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                      f"Origin: http://{host}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Protocol: streamlit, PLACEHOLDER_AUTH_TOKEN\r\n"
                      "User-Agent: class_swarm\r\n\r\n").encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):                # byte by byte: nothing after the head is read
            byte = sock.recv(1)
            if not byte:
                raise ConnectionError("the server closed the websocket handshake")
            head += byte
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"websocket handshake refused: {head.decode(errors='replace')}")
        if found := re.search(rb"(?im)^set-cookie: *([^;\r\n]+)", head):
            self.cookie = found.group(1).decode()
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.settimeout(None)
        return sock

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
        n = len(payload)
        head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else
                                         bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                         bytes([0x80 | 127]) + struct.pack(">Q", n))
        mask = os.urandom(4)
        masked = (np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
        self.sock.sendall(head + mask + masked)

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


# ---------------------------------------------------------------------------------------- the swarm, seen from outside
class Swarm:
    """`python -m bench.class_swarm --swarm ...` in its own process (its own interpreter and GIL); its events, as
    they come."""

    def __init__(self, port: int, code: str, n: int, lang: str | None, join_gap_s: float):
        self.n = n
        self.runs: list[list[tuple[float, float, str]]] = [[] for _ in range(n)]
        self.polls: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.summary: dict | None = None
        self.ready = threading.Event()
        self._lock = threading.Lock()
        command = [sys.executable, "-m", "bench.class_swarm", "--swarm", str(port), code, str(n),
                   "--join-gap-s", str(join_gap_s)] + (["--lang", lang] if lang else [])
        self.proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self._lock:
                if kind == "run":
                    i, start, end, query = rest.split(" ", 3) if rest.count(" ") >= 3 else (*rest.split(" "), "")
                    self.runs[int(i)].append((float(start), float(end), query))
                elif kind == "poll":
                    _, sent, end, _ = rest.split(" ")
                    self.polls.append((float(sent), float(end)))
                elif kind == "error":
                    self.errors.append(rest)
                elif kind == "ready":
                    self.ready.set()
                elif kind == "summary":
                    self.summary = json.loads(rest)

    def poll_times(self, t0: float, t1: float) -> list[float]:
        with self._lock:
            return [end - sent for sent, end in self.polls if t0 <= sent <= t1]

    def followed(self, after: float, want: Callable[[str], bool]) -> list[tuple[float, float] | None]:
        """Each follower's first whole run started after `after` that shows what want() accepts: (start, end)."""
        with self._lock:
            return [next(((s, e) for s, e, q in runs if s > after and want(q)), None) for runs in self.runs]

    def close(self) -> dict:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        return self.summary or {}


# -------------------------------------------------------------------------------------------------------- the bench
def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    return f"unknown CPU ({os.cpu_count()} cores)"


def pct(values: list[float], q: float) -> float:
    return sorted(values)[max(0, round(q * len(values)) - 1)]


def students_shown(teacher) -> int | None:
    found = re.search(r"\d+", teacher.evaluate(STRIP_JS))
    return int(found.group()) if found else None


def step_layers(teacher, steps: int, teacher_runs, swarm_: Swarm | None = None, timeout_s: float = 60.0) -> dict:
    """`steps` layer steps of the teacher (ArrowUp, ArrowDown, ...): the teacher's server run times, and with a
    swarm, each follower's rerun of the new view (its end after the teacher's run's end, its own length)."""
    from harness.classroom import SHOWS_JS, query

    out = {"teacher": [], "view": [], "served": [], "follower_run": [], "late": 0}
    layer = int(query(teacher.url).get("layer", "0"))
    for i in range(steps):
        key, layer = ("ArrowUp", layer + 1) if i % 2 == 0 else ("ArrowDown", layer - 1)
        want = str(layer) if layer else None
        teacher.evaluate("document.activeElement && document.activeElement.blur()")
        pressed = time.time()
        teacher.keyboard.press(key)
        teacher.wait_for_function(SHOWS_JS, arg=[{"layer": want}, 1], polling=20)
        out["view"].append(time.time() - pressed)                  # the teacher's key to the new chart on screen
        if (run := teacher_runs.run_after(pressed)) is not None:
            out["teacher"].append(run)
        teacher_end = teacher_runs.first_after(pressed)
        if swarm_ is not None and teacher_end is not None:
            def shows(q: str, want: str | None = want) -> bool:
                return parse_qs(q).get("layer", [None])[-1] == want
            deadline = time.monotonic() + timeout_s
            while None in (runs := swarm_.followed(pressed, shows)) and time.monotonic() < deadline:
                time.sleep(0.05)
            out["late"] += runs.count(None)
            out["served"] += [e - teacher_end for s, e in filter(None, runs)]
            out["follower_run"] += [e - s for s, e in filter(None, runs)]
        time.sleep(1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, nargs="+", default=[10])
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lang", default=None, help="the followers' lang= (their join link's own)")
    parser.add_argument("--join-gap-s", type=float, default=0.1, help="seconds between two followers joining")
    parser.add_argument("--replicas", type=int, default=1, choices=(1, 2),
                        help="2: the README's deployment (two replicas, Redis, HAProxy) on this machine's cores")
    parser.add_argument("--swarm", nargs=3, metavar=("PORT", "CODE", "N"),
                        help="only the followers, against a server with that class open (events on stdout)")
    args = parser.parse_args()
    if args.swarm:
        port, code, n = args.swarm
        swarm(int(port), code, int(n), args.lang, args.join_gap_s, sys.stdout)
        return
    bench(args)


class Probes:
    """The CPU-seconds of several server processes together (bench_classroom.ServerProbe each)."""

    def __init__(self, pids: list[int]):
        from bench.bench_classroom import ServerProbe

        self.probes = [ServerProbe(pid) for pid in pids]

    def __enter__(self) -> Probes:
        for probe in self.probes:
            probe.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for probe in self.probes:
            probe.__exit__(*exc)

    @property
    def cpu_used(self) -> float:
        return sum(probe.cpu_used for probe in self.probes)


def idle_cpu(pids: list[int], seconds: float) -> float:
    with Probes(pids) as probes:
        time.sleep(seconds)
    return probes.cpu_used


@contextlib.contextmanager
def deployment(replicas: int, folder: Path):
    """(the app servers' processes, the teacher's server URL, the port the followers connect to): one server; or
    the README's deployment (deploy/haproxy.cfg, deploy/redis.conf): two replicas sharing a class through Redis,
    HAProxy in front, the teacher's browser on the first replica and the followers through the proxy (its round
    robin puts every other one on each replica)."""
    from harness.browser import free_port, running_app

    if replicas == 1:
        with running_app(ROOT, folder / "server.log", 120) as (proc, url):
            yield [proc], url, urlsplit(url).port
        return
    if replicas != 2:
        raise ValueError("deploy/haproxy.cfg has two replicas: --replicas 1 or 2")
    from harness.redis_server import running_redis

    with running_redis(ROOT / "deploy/redis.conf") as redis_url, \
            mock.patch.dict(os.environ, {"ATLAS_REDIS_URL": redis_url}), contextlib.ExitStack() as stack:
        apps = [stack.enter_context(running_app(ROOT, folder / f"server{i}.log", 120)) for i in range(2)]
        port = free_port()
        env = {"ATLAS_BIND": f"127.0.0.1:{port}", **{f"ATLAS_APP{i + 1}": url.removeprefix("http://")
                                                    for i, (_, url) in enumerate(apps)}}
        with (folder / "haproxy.log").open("wb") as log:
            proxy = subprocess.Popen(["/usr/sbin/haproxy", "-db", "-f", str(ROOT / "deploy/haproxy.cfg")],
                                     env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if proxy.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"haproxy did not reach a replica (exit {proxy.poll()})")
                time.sleep(0.3)
            yield [proc for proc, _ in apps], apps[0][1], port
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)


def bench(args) -> None:
    from playwright.sync_api import sync_playwright

    from bench.bench_class_follow import SHORTCUTS_JS, RunEnds, new_page
    from harness.browser import CHROMIUM, CHROMIUM_ARGS
    from harness.classroom import teacher_key
    from tests.e2e.test_browser import open_view

    print(f"CPU: {cpu_name()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, deployment(args.replicas, Path(tmp)) as (procs, url, follow_port), \
            sync_playwright() as pw:
        pids = [proc.pid for proc in procs]
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        port = urlsplit(url).port
        teacher_runs = RunEnds()
        tap = StampedTap(port, teacher_runs.on_message)
        teacher = new_page(browser)
        open_view(teacher, tap.url + "/?present=1")
        teacher.locator(".st-key-w_class_start button").first.click()
        code, _ = teacher_key(teacher)                  # the key cookie (never in the teacher's address)
        teacher.wait_for_function(SHORTCUTS_JS)
        time.sleep(2)
        alone_idle = idle_cpu(pids, args.idle_s)
        with Probes(pids) as probe:
            alone = step_layers(teacher, args.steps, teacher_runs)
        alone_cpu = probe.cpu_used / args.steps
        print(f"teacher alone: server idle {alone_idle / args.idle_s:.1%} of a core; run median "
              f"{statistics.median(alone['teacher']) * 1e3:.0f} ms; server CPU per change {alone_cpu:.3f} s",
              flush=True)
        for n in args.followers:
            followers = Swarm(follow_port, code, n, args.lang, args.join_gap_s)
            if not followers.ready.wait(timeout=60 + 5 * n):
                raise RuntimeError(f"the {n} followers did not all finish a first run: {followers.errors[:5]}")
            time.sleep(6)                                            # every follower's first heartbeat
            shown = students_shown(teacher)
            t0 = time.time()
            class_idle = idle_cpu(pids, args.idle_s)
            polls = followers.poll_times(t0, time.time())
            started = time.monotonic()
            with Probes(pids) as probe:
                steps = step_layers(teacher, args.steps, teacher_runs, followers)
            phase_s = time.monotonic() - started
            summary = followers.close()
            idle_rate = (class_idle - alone_idle) / args.idle_s              # core-seconds per second, N followers
            per_change = (probe.cpu_used - alone_cpu * args.steps - idle_rate * phase_s) / args.steps / n
            gross = (probe.cpu_used - alone_cpu * args.steps) / args.steps / n
            rows.append({"n": n, "shown": shown, "idle": idle_rate / n, "polls": polls, "steps": steps,
                         "per_change": per_change, "gross": gross,
                         "poll_rate": len(polls) / n / args.idle_s, "summary": summary, "errors": followers.errors})
            served = steps["served"]
            print(f"{n} followers: the teacher shows {shown} students; idle {idle_rate / n:.2%} of a core each; "
                  f"served p50 {statistics.median(served):.3f} s, p95 {pct(served, 0.95):.3f} s, max "
                  f"{max(served):.3f} s (n={len(served)}, {steps['late']} never)" if served else
                  f"{n} followers: no follower's rerun seen", flush=True)
            if n != args.followers[-1]:
                time.sleep(16)                        # the store forgets the closed followers (15 s of heartbeats)
        browser.close()
        tap.close()
    table(args, alone, alone_cpu, rows)


def table(args, alone: dict, alone_cpu: float, rows: list[dict]) -> None:
    ms = 1e3
    print()
    where = "one server" if args.replicas == 1 else "two replicas behind HAProxy sharing Redis (deploy/)"
    print(f"Live class on {where}, {cpu_name()}; {args.steps} teacher changes (a layer step), "
          f"idle {args.idle_s:.0f} s; the followers speak the websocket protocol (bench/class_swarm.py).")
    print(f"teacher alone: page run (server) median {statistics.median(alone['teacher']) * ms:.0f} ms, "
          f"server CPU {alone_cpu:.3f} s per change")
    print(f"teacher's view alone (key to the new chart on screen, in Chromium): median "
          f"{statistics.median(alone['view']) * ms:.0f} ms")
    head = ("followers", "shown", "idle core", "poll p50/p95 ms", "teacher run ms", "x alone", "view ms", "x alone",
            "CPU s/fol/chg", "served p50 s", "p95 s", "max s", "fol run ms", "swarm core")
    print(" | ".join(head))
    for r in rows:
        s, steps, polls = r["summary"], r["steps"], r["polls"]
        served, teacher_run = steps["served"], steps["teacher"]
        cells = [str(r["n"]), str(r["shown"]), f"{r['idle']:.2%}",
                 f"{statistics.median(polls) * ms:.0f}/{pct(polls, 0.95) * ms:.0f}" if polls else "-",
                 f"{statistics.median(teacher_run) * ms:.0f}" if teacher_run else "-",
                 f"{statistics.median(teacher_run) / statistics.median(alone['teacher']):.2f}" if teacher_run else "-",
                 f"{statistics.median(steps['view']) * ms:.0f}",
                 f"{statistics.median(steps['view']) / statistics.median(alone['view']):.2f}",
                 f"{r['per_change']:.3f}",
                 *((f"{statistics.median(served):.3f}", f"{pct(served, 0.95):.3f}", f"{max(served):.3f}",
                    f"{statistics.median(steps['follower_run']) * ms:.0f}") if served else ("-",) * 4),
                 f"{s.get('cpu_s', 0) / max(s.get('wall_s', 1), 1e-9):.1%}"]
        print(" | ".join(c.rjust(len(h)) for c, h in zip(cells, head, strict=True)))
        if served:
            waited = [w - f for w, f in zip(steps["served"], steps["follower_run"], strict=True)]
            polled = (f"per poll the server sent {s['poll_bytes'] / s['polls']:.0f} B, {r['poll_rate']:.2f} polls a "
                      "second each" if s.get("polls") else
                      f"{s.get('asks', 0) / r['n']:.1f} asks of the wait route each")
            print(f"    a follower's rerun started p50 {statistics.median(waited):.3f} s after the teacher's run "
                  f"ended; {polled}; per whole run {s['run_bytes'] / max(s['runs'], 1):.0f} B; CPU per follower per "
                  f"change with the phase's idle cost {r['gross']:.3f} s (bench_class_follow's measure); "
                  f"{steps['late']} reruns never seen; errors: {r['errors'][:3] or 'none'}")
        else:
            print(f"    errors: {r['errors'][:3] or 'none'}")
        if s.get("unstamped_reads"):
            print(f"    {s['unstamped_reads']} reads had no kernel time stamp (the swarm's clock used for them)")


if __name__ == "__main__":
    main()
