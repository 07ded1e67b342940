"""A real redis-server (Debian's) on a free port for a test or a bench, stopped by its pid afterwards; it can be
stopped and started again on the same port and data folder, or paused (SIGSTOP: a hung Redis) and resumed.

With deploy/redis.conf (whose default user is off) it runs as the README says: the app's ACL user `atlas` limited to
`atlas:*` keys, given on the command line (APP_USER_RULES), plus an `admin` user for the test's own looks (INFO,
CLIENT PAUSE)."""
from __future__ import annotations

import contextlib
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from harness.browser import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
APP_USER_RULES = ["~atlas:*", "+@all", "-@dangerous", "-@admin"]     # the README's, after `atlas on >PASSWORD`


class RedisServer:
    """One redis-server: url (the app's, with its password under an ACL config), admin_url, stop(), start(),
    pause(), resume()."""

    def __init__(self, conf: Path | None = None, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="redis-"))
        self.conf, self.extra = conf, extra
        self.proc: subprocess.Popen | None = None
        if conf is None:
            self.url = self.admin_url = f"redis://127.0.0.1:{self.port}/0"
            self.users: list[str] = []
        else:
            password, admin = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
            self.url = f"redis://atlas:{password}@127.0.0.1:{self.port}/0"
            self.admin_url = f"redis://admin:{admin}@127.0.0.1:{self.port}/0"
            self.users = ["--user", "atlas", "on", f">{password}", *APP_USER_RULES,
                          "--user", "admin", "on", f">{admin}", "~*", "&*", "+@all"]

    def start(self) -> None:
        memory_only = [] if self.conf else ["--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(
            [REDIS_SERVER, *([str(self.conf)] if self.conf else []), "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), *memory_only, *self.users, *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.admin_url).ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start (exit {self.proc.poll()})") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM (Redis writes its append-only file, if any, and exits), then wait for it."""
        if self.proc is None:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: Redis holds its connections and answers nothing (a hung Redis)."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def admin(self) -> redis.Redis:
        return redis.Redis.from_url(self.admin_url, decode_responses=True)


@contextlib.contextmanager
def redis_server(conf: Path | None = None, extra: tuple[str, ...] = ()) -> Iterator[RedisServer]:
    """A RedisServer started (with the config file conf, if given; else no persistence), stopped afterwards."""
    server = RedisServer(conf, extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


@contextlib.contextmanager
def running_redis(conf: Path | None = None) -> Iterator[str]:
    """redis_server(conf): the app's URL while it runs."""
    with redis_server(conf) as server:
        yield server.url
