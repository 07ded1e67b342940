"""What the e2e tests and bench/bench_ui.py share: how to launch Debian's Chromium, a free port, and when the
Streamlit app counts as idle with its charts drawn."""
from __future__ import annotations

import socket

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# The app is idle (script finished, nothing stale, connected) and has at least `min` plotly charts, all drawn.
IDLE_WITH_CHARTS_JS = """(min) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') === 'running') return false;
  if (app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
  const status = document.querySelector('[data-testid="stStatusWidget"]');
  if (status && /running|stop/i.test(status.textContent)) return false;   // not "Source file changed"
  if (document.querySelector('[data-stale="true"]')) return false;
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  return charts.length >= min && charts.every(c => c.querySelector('.main-svg'));
}"""


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
