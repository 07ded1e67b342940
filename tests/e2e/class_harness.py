"""What the live-class browser tests share: servers that share a class store (one process, or replicas on one real
Redis, or replicas behind HAProxy), and reading a follower's view in the browser."""
from __future__ import annotations

import os
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qs, urlsplit

from tests.e2e.browser_harness import IDLE_WITH_CHARTS_JS, running_app

# The page's path and query hold `want` ({"path": ..., name: value, name: None for absent}) and the app is idle with
# its charts drawn (a run ends by writing the URL, after its figures).
SHOWS_JS = """([want, min]) => {
  const q = new URLSearchParams(location.search);
  const path = location.pathname.replace(/\\/$/, '') || '/';
  for (const [k, v] of Object.entries(want)) {
    if (k === 'path' ? path !== v : q.get(k) !== v) return false;
  }
  return (""" + IDLE_WITH_CHARTS_JS + """)(min);
}"""


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


@contextmanager
def servers(root: Path, log_dir: Path, n: int, timeout_s: float, redis_url: str | None = None):
    """n app servers (with ATLAS_REDIS_URL = redis_url when given): their base URLs."""
    env = {"ATLAS_REDIS_URL": redis_url} if redis_url else {}
    with ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, env))
        if not redis_url:
            os.environ.pop("ATLAS_REDIS_URL", None)
        urls = [stack.enter_context(running_app(root, log_dir / f"server{i}.log", timeout_s))[1] for i in range(n)]
        yield urls


def wait_shows(page, want: dict, t0: float, timeout_ms: int = 30_000, min_charts: int = 1) -> float:
    """Seconds from t0 until page shows want (SHOWS_JS)."""
    page.wait_for_function(SHOWS_JS, arg=[want, min_charts], timeout=timeout_ms, polling=40)
    return time.monotonic() - t0
