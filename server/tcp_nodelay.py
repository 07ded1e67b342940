"""The server's answers go out without Nagle's delay: TCP_NODELAY on the process's listening TCP sockets (accepted
connections inherit it on Linux).

Streamlit 1.67 binds its listening socket itself with `socket.socket(family)`: protocol number 0, which asyncio's
transport does not recognise as TCP, so it leaves Nagle's algorithm on for every connection. A response's body then
waits for the ACK of its headers, which the client delays up to 40 ms: every HTTP answer on a kept-alive connection
(a class follower's wait for the next view, measured 43 ms instead of 0.5) and the last small websocket messages of
a run arrived ~40 ms late. Called from app.py's lifespan, when Streamlit's socket is listening and before it accepts.
Each descriptor is looked at through a duplicate, closed whatever it turns out to be (not a socket included).
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

FDS = Path("/proc/self/fd")


def no_delay_on_listening_sockets() -> int:
    """Sets TCP_NODELAY on each listening TCP socket of this process (Linux: found in /proc/self/fd; elsewhere
    none); how many."""
    done = 0
    for fd in sorted(int(name) for name in os.listdir(FDS)) if FDS.is_dir() else []:
        try:
            copy = os.dup(fd)
        except OSError:                                   # closed meanwhile
            continue
        try:
            sock = socket.socket(fileno=copy)
        except OSError:                                   # not a socket
            os.close(copy)
            continue
        with sock:
            try:
                if (sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
                        and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    done += 1
            except OSError:
                continue
    return done
