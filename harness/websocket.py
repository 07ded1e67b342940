"""A websocket client on a raw socket, as little as a script needs to speak to a server: the opening handshake
(no extension offered, so nothing is compressed), the client's masked frames, the server's frames reassembled into
whole messages, and reads stamped by the kernel (SO_TIMESTAMPNS: when the bytes reached the socket, on
time.time()'s clock), so a client late to read its socket does not make the server look slow."""
from __future__ import annotations

import base64
import os
import re
import socket
import struct

import numpy as np

SO_TIMESTAMPNS = 35                 # linux/asm-generic/socket.h (Python's socket module does not name it)
TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def connect(port: int, path: str, protocols: str, user_agent: str) -> tuple[socket.socket, bytes]:
    """A websocket to 127.0.0.1:port/path (Sec-WebSocket-Protocol: protocols), its reads kernel-stamped: (the
    socket, the server's handshake head)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    host = f"127.0.0.1:{port}"
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                  f"Origin: http://{host}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n"
                  f"Sec-WebSocket-Protocol: {protocols}\r\nUser-Agent: {user_agent}\r\n\r\n").encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):                # byte by byte: nothing after the head is read
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError("the server closed the websocket handshake")
        head += byte
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"websocket handshake refused: {head.decode(errors='replace')}")
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(None)
    return sock, head


def set_cookie(head: bytes) -> str:
    """The first cookie an HTTP head sets (name=value), or "" (HAProxy's affinity cookie, in a proxied handshake)."""
    found = re.search(rb"(?im)^set-cookie: *([^;\r\n]+)", head)
    return found.group(1).decode() if found else ""


def client_frame(payload: bytes, opcode: int) -> bytes:
    """One final frame from the client (masked, as a client's must be)."""
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else
                                     bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                     bytes([0x80 | 127]) + struct.pack(">Q", n))
    mask = os.urandom(4)
    masked = (np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
    return head + mask + masked


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
