"""A local proxy in front of the app's server that hands every websocket message passing through it, decoded and time
stamped, to a callback: when the server sent a message, whatever the browser's own CPU (30 Chromium tabs on the
server's 2 cores read their sockets late; a class's browsers run on their own machines).

One WebSocketTap per browser page (its own port, so its messages are that page's). Plain HTTP connections are
relayed as they are. A websocket upgrade goes on without the browser's offer of extensions (so no message is
compressed: permessage-deflate is never agreed); its frames are read whole, forwarded at once (a browser's message
may first be held: see WebSocketTap's hold), unmasked (browser to server) and reported. StampedTap stamps the
server's messages with the kernel's time of arrival instead.
"""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import numpy as np

from harness.websocket import SO_TIMESTAMPNS, Frames, read_stamped

TO_SERVER, TO_BROWSER = "to_server", "to_browser"
CLOSE = 0x8


class WebSocketTap:
    """127.0.0.1:port relaying to 127.0.0.1:target_port; on_message(direction, wall_time, opcode, data) for every
    whole websocket message (data decoded), from the relaying threads. hold(opcode, data), if given, is called with
    each whole message from the browser before it is forwarded (it may wait: a barrier that sends a class's clicks
    to the server together); its time stamp is then when it was forwarded."""

    def __init__(self, target_port: int, on_message: Callable[[str, float, int, bytes], None],
                 hold: Callable[[int, bytes], None] | None = None):
        self.target_port = target_port
        self.on_message = on_message
        self.hold = hold if hold is not None else lambda opcode, data: None
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True, name=f"tap-{self.port}").start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                browser, _ = self._listener.accept()
            except OSError:                       # closed
                return
            threading.Thread(target=self._connection, args=(browser,), daemon=True).start()

    def _connection(self, browser: socket.socket) -> None:
        with browser, socket.create_connection(("127.0.0.1", self.target_port)) as server:
            for s in (browser, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            request = _read_head(browser)
            upgrade = b"upgrade: websocket" in request.lower()
            server.sendall(_without_extensions(request) if upgrade else request)
            if not upgrade:
                relay = threading.Thread(target=_relay, args=(server, browser), daemon=True)
                relay.start()
                _relay(browser, server)
                relay.join()
                return
            browser.sendall(_read_head(server))
            upstream = threading.Thread(target=self._frames, args=(browser, server, TO_SERVER), daemon=True)
            upstream.start()
            self._frames(server, browser, TO_BROWSER)
            upstream.join(timeout=5)

    def _frames(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        """Forward source's frames to sink as they arrive (a browser's whole message after hold); report each
        whole message."""
        reader = source.makefile("rb")
        parts: list[bytes] = []
        opcode = 0
        try:
            while True:
                head = _exact(reader, 2)
                n = head[1] & 0x7F
                extended = _exact(reader, 2 if n == 126 else 8 if n == 127 else 0)
                n = int.from_bytes(extended, "big") if extended else n
                mask = _exact(reader, 4) if head[1] & 0x80 else b""
                payload = _exact(reader, n)
                frame = head + extended + mask + payload
                code = head[0] & 0x0F
                if code >= CLOSE:                     # control frames: only a close matters
                    sink.sendall(frame)
                    if code == CLOSE:
                        return
                    continue
                if mask:
                    payload = (np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
                if code:                              # a message's first frame
                    opcode, parts = code, []
                parts.append(payload)
                whole = b"".join(parts) if head[0] & 0x80 else None       # FIN: the message is whole
                if whole is not None and direction == TO_SERVER:
                    self.hold(opcode, whole)
                sink.sendall(frame)
                if whole is not None:
                    self.on_message(direction, time.time(), opcode, whole)
        except (ConnectionError, OSError, EOFError):
            return
        finally:
            shut_both(source, sink)


class StampedTap(WebSocketTap):
    """The tap, its server's messages stamped by the kernel (when they reached the tap's socket)
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


def _read_head(sock: socket.socket) -> bytes:
    """An HTTP head up to and including its blank line (nothing after it is read)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError("closed before the end of an HTTP head")
        head += byte
    return head


def _without_extensions(request: bytes) -> bytes:
    """An upgrade request less its Sec-WebSocket-Extensions lines: the server then compresses nothing."""
    lines = request.split(b"\r\n")
    return b"\r\n".join(line for line in lines if not line.lower().startswith(b"sec-websocket-extensions:"))


def _exact(reader, n: int) -> bytes:
    data = reader.read(n) if n else b""
    if len(data) != n:
        raise EOFError
    return data


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def shut_both(*sockets: socket.socket) -> None:
    """Shut a relay's two sockets down (either may be closed already)."""
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
