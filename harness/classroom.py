"""What the live-class browser tests and benches share: servers that share a class store (one process, or replicas
on one real Redis, or replicas behind HAProxy), reading a follower's view in the browser, the teacher's key as the
browser holds it (an HttpOnly cookie: Playwright reads it, the page's scripts cannot), and every address a page went
to."""
from __future__ import annotations

import os
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from app_core.classroom import codes
from harness.browser import IDLE_WITH_CHARTS_JS, running_app

KEY_COOKIE = "atlas_teach"           # server/class_key.py

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


def key_cookie(page, timeout_s: float = 30) -> dict | None:
    """The teacher's key cookie of page's browser context, once it holds a key (None if it does not within
    timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [c for c in page.context.cookies() if c["name"] == KEY_COOKIE and c["value"]]
        if found or time.monotonic() > deadline:
            return found[0] if found else None
        time.sleep(0.1)


def teacher_key(page, timeout_s: float = 30) -> tuple[str, str]:
    """(code, secret) of the class page's browser teaches, from its key cookie."""
    cookie = key_cookie(page, timeout_s)
    assert cookie is not None, "the teacher's browser got no key cookie"
    found = codes.read_teacher_token(cookie["value"])
    assert found is not None, cookie
    return found


def cookie_gone(page, timeout_s: float = 30) -> bool:
    """Whether the key cookie leaves page's browser context within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while any(c["name"] == KEY_COOKIE and c["value"] for c in page.context.cookies()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def watch_addresses(page) -> list[str]:
    """Every address page goes to from now on: its navigations (the history API's included) and its requests."""
    seen: list[str] = []
    page.on("framenavigated", lambda frame: seen.append(frame.url))
    page.on("request", lambda request: seen.append(request.url))
    return seen


@contextmanager
def servers(root: Path, log_dir: Path, n: int, timeout_s: float, redis_url: str | None = None,
            env: dict[str, str] | None = None, procs: list | None = None):
    """n app servers (with ATLAS_REDIS_URL = redis_url when given, and env): their base URLs (their processes
    appended to procs, when given)."""
    env = {**({"ATLAS_REDIS_URL": redis_url} if redis_url else {}), **(env or {})}
    with ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, env))
        if not redis_url:
            os.environ.pop("ATLAS_REDIS_URL", None)
        started = [stack.enter_context(running_app(root, log_dir / f"server{i}.log", timeout_s)) for i in range(n)]
        if procs is not None:
            procs.extend(proc for proc, _ in started)
        yield [url for _, url in started]


# What a page showed when a wait for its view ran out: its address, the app's run and connection state, the status
# widget, stale elements, charts (drawn / all) and a popover's text box.
SHOWN_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  const box = document.querySelector('[data-testid="stPopoverBody"] textarea');
  return {url: location.href, script: app && app.getAttribute('data-test-script-state'),
          connection: app && app.getAttribute('data-test-connection-state'),
          status: document.querySelector('[data-testid="stStatusWidget"]')?.textContent ?? null,
          stale: document.querySelectorAll('[data-stale="true"]').length,
          charts: charts.filter(c => c.querySelector('.main-svg')).length + '/' + charts.length,
          exception: document.querySelector('[data-testid="stException"]')?.innerText?.slice(0, 300) ?? null,
          text_box: box ? box.value : null};
}"""


def wait_shows(page, want: dict, t0: float, timeout_ms: int = 30_000, min_charts: int = 1) -> float:
    """Seconds from t0 until page shows want (SHOWS_JS); a wait that runs out says what the page showed instead."""
    try:
        page.wait_for_function(SHOWS_JS, arg=[want, min_charts], timeout=timeout_ms, polling=40)
    except PlaywrightTimeoutError as err:
        raise AssertionError(f"not shown within {timeout_ms} ms: {want}; the page showed {shown(page)}") from err
    return time.monotonic() - t0


def shown(page) -> dict | str:
    """SHOWN_JS of page, or why it could not be read."""
    try:
        return page.evaluate(SHOWN_JS)
    except Exception as err:  # noqa: BLE001 - a page that cannot answer is what the message reports
        return f"unreadable ({err})"
