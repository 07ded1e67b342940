"""TCP_NODELAY on the process's listening sockets (server/tcp_nodelay.py), inherited by what they accept."""
from __future__ import annotations

import socket

from server.tcp_nodelay import no_delay_on_listening_sockets


def test_a_listening_socket_made_as_streamlit_makes_it_accepts_connections_without_nagle():
    with socket.socket(family=socket.AF_INET) as listening, socket.socket(family=socket.AF_INET) as idle:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        idle.bind(("127.0.0.1", 0))                                 # bound, not listening: left alone
        before = listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert no_delay_on_listening_sockets() >= 1
        with socket.create_connection(listening.getsockname()) as client:
            accepted, _ = listening.accept()
            with accepted:
                assert (before, accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)) == (0, 1)
                assert accepted.proto == 0                          # what asyncio takes for "not TCP"
        assert idle.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        assert client.fileno() == -1


def test_no_descriptor_is_left_behind():
    """Files, pipes and sockets that are not listening are looked at through duplicates, every one closed again
    (a duplicate of a non-socket was kept open, one per descriptor, at every start)."""
    import os
    from pathlib import Path

    read_end, write_end = os.pipe()
    with open(__file__, "rb"), socket.socket() as idle:
        try:
            before = sorted(os.listdir("/proc/self/fd"))
            for _ in range(3):
                no_delay_on_listening_sockets()
            after = sorted(os.listdir("/proc/self/fd"))
            assert after == before and Path(__file__).exists() and idle.fileno() >= 0
        finally:
            os.close(read_end)
            os.close(write_end)
