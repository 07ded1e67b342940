"""One `streamlit run app.py` for all the workers of a pytest-xdist run: the first worker that asks starts it, the
others use it, the run's controller stops it as the run ends. Each worker's own server loaded the model, warmed up and
computed every view of the example text again (~45 CPU-s each on 2 cores, beside the browsers); one server is what a
class meets anyway: many sessions at once.

The controller starts it as the run is configured (start_shared_app, when the run holds browser tests), before its
workers exist: the server loads the model while they import and collect, and the first to need it waits only for
what is left of that. A worker that finds none starts one itself, under a lock.

The run's files sit in the temp dir, named by the controller's pid (a worker's parent): a lock, the server's log and
server.json (its URL and process group)."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from harness.browser import free_port, start_app, stop_app, wait_answering, wait_healthy

STOP_WAIT_S = 15           # after SIGTERM, the server's group gets this long before SIGKILL


def run_folder(controller_pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"atlas-shared-app-{controller_pid}"


def start_shared_app(root: Path, controller_pid: int) -> None:
    """From the controller: the server started (not waited for) and written down for the workers."""
    folder = run_folder(controller_pid)
    folder.mkdir(exist_ok=True)
    _, server = _start(root, folder)
    (folder / "server.json").write_text(json.dumps(server))


def shared_app_url(root: Path, timeout_s: float) -> str:
    """From an xdist worker: the run's server's base URL once it answers; started here if nobody has yet."""
    folder = run_folder(os.getppid())
    folder.mkdir(exist_ok=True)
    info, log_path = folder / "server.json", folder / "server.log"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # released as the file closes
        if info.exists():
            server = json.loads(info.read_text())
            why = wait_answering(lambda: None if _alive(server["pid"]) else "streamlit exited", server["url"],
                                 timeout_s)
        else:
            proc, server = _start(root, folder)
            why = wait_healthy(proc, server["url"], timeout_s)
            if not why:
                info.write_text(json.dumps(server))
            else:
                stop_app(proc)
        if why:
            raise RuntimeError(f"{why}:\n{log_path.read_text(errors='replace')[-3000:]}")
        return server["url"]


def _start(root: Path, folder: Path) -> tuple[subprocess.Popen, dict]:
    """A server started on a free port, logging to folder's server.log: its process and {url, pid}."""
    port = free_port()
    with (folder / "server.log").open("ab") as log:
        proc = start_app(root, port, log)
    return proc, {"url": f"http://127.0.0.1:{port}", "pid": proc.pid}


def stop_shared_app(controller_pid: int) -> None:
    """From the controller, as the run ends: SIGTERM, then SIGKILL, the server's process group; its folder removed."""
    folder = run_folder(controller_pid)
    info = folder / "server.json"
    if info.exists():
        group = json.loads(info.read_text())["pid"]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + STOP_WAIT_S
            while time.monotonic() < deadline and _alive(group):
                time.sleep(0.2)
            if not _alive(group):
                break
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not: its parent, a worker, may be gone before anyone reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
