"""The README's deployment launched for real on free local ports: HAProxy (deploy/haproxy.cfg) in front of two app
replicas that share a class through Redis (deploy/redis.conf, its ACL user and password); or one server alone."""
from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from unittest import mock
from urllib.parse import urlsplit

from harness.browser import free_port, running_app
from harness.redis_server import running_redis

ROOT = Path(__file__).resolve().parents[1]
HAPROXY = "/usr/sbin/haproxy"
HAPROXY_CFG = ROOT / "deploy/haproxy.cfg"


def wait_proxy(url: str, proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """Until the proxy answers the app's health check with 200 (a replica is up); raises if it exits or never
    does."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"haproxy exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"haproxy did not reach a healthy replica in {timeout_s:.0f} s")
        time.sleep(0.3)


@contextlib.contextmanager
def running_haproxy(apps: list[str], log_path: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """HAProxy with deploy/haproxy.cfg on a free port in front of the two replicas `apps` (their base URLs), its
    output (option httplog) to log_path: its base URL once it reaches a replica; stopped afterwards. It sees no
    ATLAS_ variable but its bind, its replicas and `env`'s, so the config's defaults (ATLAS_CLASS_RATE) hold unless
    env names them. The config is checked first (haproxy -c)."""
    port = free_port()
    proxy_env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    proxy_env |= {"ATLAS_BIND": f"127.0.0.1:{port}",
                  **{f"ATLAS_APP{i + 1}": url.removeprefix("http://") for i, url in enumerate(apps)}, **(env or {})}
    checked = subprocess.run([HAPROXY, "-c", "-q", "-f", str(HAPROXY_CFG)], env=proxy_env, capture_output=True,
                             text=True)
    if checked.returncode != 0:
        raise RuntimeError(f"haproxy -c refused {HAPROXY_CFG}:\n{checked.stdout}{checked.stderr}")
    with log_path.open("wb") as log:
        proxy = subprocess.Popen([HAPROXY, "-db", "-f", str(HAPROXY_CFG)], env=proxy_env, stdout=log,
                                 stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_proxy(url, proxy)
        yield url
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)


@contextlib.contextmanager
def deployment(replicas: int, folder: Path) -> Iterator[tuple[list[subprocess.Popen], str, int]]:
    """(the app servers' processes, the teacher's server URL, the port the followers connect to), logs in folder:
    one server; or the README's deployment: two replicas sharing a class through Redis, HAProxy in front, the
    teacher's browser on the first replica and the followers through the proxy (its round robin puts every other
    one on each replica)."""
    if replicas == 1:
        with running_app(ROOT, folder / "server.log", 120) as (proc, url):
            yield [proc], url, urlsplit(url).port
        return
    if replicas != 2:
        raise ValueError("deploy/haproxy.cfg has two replicas: replicas 1 or 2")
    with running_redis(ROOT / "deploy/redis.conf") as redis_url, \
            mock.patch.dict(os.environ, {"ATLAS_REDIS_URL": redis_url}), contextlib.ExitStack() as stack:
        apps = [stack.enter_context(running_app(ROOT, folder / f"server{i}.log", 120)) for i in range(2)]
        with running_haproxy([url for _, url in apps], folder / "haproxy.log") as proxy_url:
            yield [proc for proc, _ in apps], apps[0][1], urlsplit(proxy_url).port
