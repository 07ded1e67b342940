"""A test's own Streamlit script on a bare server, spoken to over a raw websocket: `streamlit run` of a file in a
folder on a free port (headless, no file watcher, its output in the folder's server.log), a session whose run is
asked for as the frontend asks, and the ForwardMsgs the server sends, in order."""
from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from harness.browser import free_port, stop_app, wait_healthy
from harness.websocket import BINARY, Frames, client_frame, connect

HEALTHY_S = 60


@contextmanager
def script_server(folder: Path, script: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """`streamlit run <script>` in folder: its port once healthy (raises with its log if never); stopped after."""
    port = free_port()
    with (folder / "server.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true", "--server.port",
             str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"], cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
    try:
        why = wait_healthy(proc, f"http://127.0.0.1:{port}", HEALTHY_S)
        if why:
            raise RuntimeError(f"{why}:\n{(folder / 'server.log').read_text(errors='replace')[-3000:]}")
        yield port
    finally:
        stop_app(proc)


def rerun_frame() -> bytes:
    """The client's frame asking for a run of the main page (no query, no widget states)."""
    rerun = BackMsg()
    rerun.rerun_script.query_string = ""
    rerun.rerun_script.widget_states.SetInParent()
    return client_frame(rerun.SerializeToString(), BINARY)


def session(port: int, agent: str) -> socket.socket:
    """A new session's websocket on the server at port (reads time out after 30 s), its first run asked for."""
    sock, _ = connect(port, "/_stcore/stream", "streamlit, PLACEHOLDER_AUTH_TOKEN", agent)
    sock.settimeout(30)
    sock.sendall(rerun_frame())
    return sock


def forward_msgs(sock: socket.socket) -> Iterator[ForwardMsg]:
    """Every ForwardMsg the server sends on sock, as it comes (until the caller stops reading)."""
    frames = Frames()
    while True:
        for opcode, payload in frames.feed(sock.recv(1 << 16)):
            if opcode == BINARY:
                msg = ForwardMsg()
                msg.ParseFromString(payload)
                yield msg
