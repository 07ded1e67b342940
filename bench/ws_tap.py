"""A local proxy in front of the app's server that hands every websocket message passing through it, decoded and time
stamped, to a callback: when the server sent a message, whatever the browser's own CPU (30 Chromium tabs on the
server's 2 cores read their sockets late; a class's browsers run on their own machines).

One WebSocketTap per browser page (its own port, so its messages are that page's). Plain HTTP connections are
relayed as they are; a websocket connection's frames are read whole, forwarded at once, then decoded: unmasked
(browser to server) and inflated where permessage-deflate compressed them (RFC 7692, with or without context
takeover, as the server's handshake answer says).
"""
from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Callable

import numpy as np

TO_SERVER, TO_BROWSER = "to_server", "to_browser"
DEFLATE_TAIL = b"\x00\x00\xff\xff"
CLOSE = 0x8


class WebSocketTap:
    """127.0.0.1:port relaying to 127.0.0.1:target_port; on_message(direction, wall_time, opcode, data) for every
    whole websocket message (data decoded), from the relaying threads."""

    def __init__(self, target_port: int, on_message: Callable[[str, float, int, bytes], None]):
        self.target_port = target_port
        self.on_message = on_message
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
            server.sendall(request)
            if b"upgrade: websocket" not in request.lower():
                relay = threading.Thread(target=_relay, args=(server, browser), daemon=True)
                relay.start()
                _relay(browser, server)
                relay.join()
                return
            answer = _read_head(server)
            browser.sendall(answer)
            to_server, to_browser = _inflaters(answer)
            upstream = threading.Thread(target=self._frames, args=(browser, server, TO_SERVER, to_server),
                                        daemon=True)
            upstream.start()
            self._frames(server, browser, TO_BROWSER, to_browser)
            upstream.join(timeout=5)

    def _frames(self, source: socket.socket, sink: socket.socket, direction: str,
                inflater: Callable[[], Callable[[bytes], bytes]] | None) -> None:
        """Forward source's frames to sink as they arrive; report each whole message."""
        reader = source.makefile("rb")
        inflate = inflater() if inflater else None
        parts: list[bytes] = []
        opcode, compressed = 0, False
        try:
            while True:
                head = _exact(reader, 2)
                n = head[1] & 0x7F
                extended = _exact(reader, 2 if n == 126 else 8 if n == 127 else 0)
                n = int.from_bytes(extended, "big") if extended else n
                mask = _exact(reader, 4) if head[1] & 0x80 else b""
                payload = _exact(reader, n)
                sink.sendall(head + extended + mask + payload)
                at = time.time()
                code = head[0] & 0x0F
                if code >= CLOSE:                     # control frames: only a close matters
                    if code == CLOSE:
                        return
                    continue
                if mask:
                    payload = (np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
                if code:                              # a message's first frame
                    opcode, compressed, parts = code, bool(head[0] & 0x40), []
                parts.append(payload)
                if head[0] & 0x80:                    # FIN: the message is whole
                    data = b"".join(parts)
                    if compressed and inflate:
                        data = inflate(data)
                    self.on_message(direction, at, opcode, data)
        except (ConnectionError, OSError, EOFError):
            return
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _read_head(sock: socket.socket) -> bytes:
    """An HTTP head up to and including its blank line (nothing after it is read)."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError("closed before the end of an HTTP head")
        head += byte
    return head


def _inflaters(answer: bytes) -> tuple:
    """Per direction, a maker of message inflaters (None when the server did not accept permessage-deflate): one
    inflater for the whole connection, or a new one per message where that side resets its context."""
    extensions = [line.split(b":", 1)[1].strip().lower() for line in answer.split(b"\r\n")
                  if line.lower().startswith(b"sec-websocket-extensions:")]
    offer = b",".join(extensions)
    if b"permessage-deflate" not in offer:
        return None, None

    def maker(reset_each_message: bool) -> Callable[[], Callable[[bytes], bytes]]:
        def make() -> Callable[[bytes], bytes]:
            state = {"z": zlib.decompressobj(-zlib.MAX_WBITS)}

            def inflate(data: bytes) -> bytes:
                if reset_each_message:
                    state["z"] = zlib.decompressobj(-zlib.MAX_WBITS)
                return state["z"].decompress(data + DEFLATE_TAIL)
            return inflate
        return make

    return maker(b"client_no_context_takeover" in offer), maker(b"server_no_context_takeover" in offer)


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
