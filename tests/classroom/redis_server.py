"""A real redis-server (Debian's) on a free port for a test, stopped by its pid afterwards."""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.e2e.browser_harness import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


@contextlib.contextmanager
def running_redis(conf: Path | None = None) -> Iterator[str]:
    """redis-server (with the config file conf, if given) on a free loopback port, no persistence: its URL while it
    runs."""
    port = free_port()
    proc = subprocess.Popen([REDIS_SERVER, *([str(conf)] if conf else []), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"redis-server did not start (exit {proc.poll()})")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
