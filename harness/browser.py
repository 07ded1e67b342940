"""What the e2e tests and the browser benches share: how to launch Debian's Chromium and the app, a free port, when
the Streamlit app counts as idle with its charts drawn, opening a view, and what the page shows (figures, controls)
read in the browser.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FIRST_LOAD_MS = 180_000        # the first run loads the model; 2 shared CPU cores can be slow

# The app is idle (script finished, nothing stale, connected) and has at least `min` plotly charts, all drawn but
# those in a hidden container (a collapsed expander: server/frontend_mends.py draws a chart once it has a width).
IDLE_WITH_CHARTS_JS = """(min) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') === 'running') return false;
  if (app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
  const status = document.querySelector('[data-testid="stStatusWidget"]');
  if (status && /running|stop/i.test(status.textContent)) return false;   // not "Source file changed"
  if (document.querySelector('[data-stale="true"]')) return false;
  const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
  return charts.length >= min && charts.every(c => c.querySelector('.main-svg') || !c.getClientRects().length);
}"""

# Init script: counts plotly's draws of each chart on its div (`__draws[event]`: "plotly_react" per Plotly.react call,
# "plotly_autosize"). plotly gives a chart's div its event emitter as a property; it is caught on its way in.
COUNT_DRAWS_INIT_JS = """Object.defineProperty(HTMLElement.prototype, 'emit', {
  configurable: true,
  get() { return undefined; },
  set(emit) {
    Object.defineProperty(this, 'emit', {configurable: true, writable: true, value: function (event) {
      this.__draws = this.__draws || {};
      this.__draws[event] = (this.__draws[event] || 0) + 1;
      return emit.apply(this, arguments);
    }});
  }});"""

# The presenter keys' handler (app_pages/frame/presenter_keys.py) has mounted: the arrow keys work.
KEYS_READY_JS = "() => window.atlasPresenterKeys?.data != null"

# Init script (context.add_init_script): counts the script runs of the page from the app's own messages, so a test
# can wait for the rerun its click caused instead of sleeping. Each ForwardMsg is one websocket frame; a run starts
# with a new_session (field 4) and ends with a script_finished (field 6). A run stopped for a newer one never sends
# its script_finished (runner.fastReruns: Streamlit drops the stopped runner's events; a contract test pins it), so
# "done" is "the run started last has ended", never "as many ends as starts". (The script state shown in the DOM
# misses a run when React draws its start and its end at once.)
# window.__stRuns: runs started; __stRunOpen: the last run started has not ended; __stFinished: runs ended;
# __stFinishedAt: when the last ended (performance.now()).
RUN_COUNTER_INIT_JS = """(() => {
  window.__stRuns = 0;
  window.__stRunOpen = false;
  window.__stFinished = 0;
  window.__stFinishedAt = 0;
  const topFields = (b) => {
    const found = new Set();
    let i = 0;
    const varint = () => {
      let v = 0, scale = 1, x;
      do { x = b[i++]; v += (x & 0x7f) * scale; scale *= 128; } while ((x & 0x80) && i < b.length);
      return v;
    };
    while (i < b.length) {
      const tag = varint(), wire = tag % 8;
      found.add(Math.floor(tag / 8));
      if (wire === 0) varint();
      else if (wire === 1) i += 8;
      else if (wire === 2) { const length = varint(); i += length; }   // (not i += varint(): i is read first)
      else if (wire === 5) i += 4;
      else break;
    }
    return found;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      this.addEventListener('message', (event) => {
        if (!(event.data instanceof ArrayBuffer)) return;
        const fields = topFields(new Uint8Array(event.data));
        if (fields.has(4)) { window.__stRuns++; window.__stRunOpen = true; }
        if (fields.has(6)) {
          window.__stFinished++;
          window.__stRunOpen = false;
          window.__stFinishedAt = performance.now();
        }
      });
    }
  };
})();"""
# A script run started after `n` runs, the run started last has ended (its end drawn: 100 ms since the last end's
# message), and the app is idle with `min` charts drawn.
RERUN_DONE_JS = ("([n, min]) => (window.__stRuns || 0) > n && !window.__stRunOpen"
                 " && performance.now() - window.__stFinishedAt >= 100 && (" + IDLE_WITH_CHARTS_JS + ")(min)")

# The browser's Back / Forward to `url`, as Streamlit's frontend hears it: the address changes, then a popstate.
HISTORY_GO_JS = """(url) => { history.pushState(null, '', url);
  window.dispatchEvent(new PopStateEvent('popstate', {state: null})); }"""

# Every plotly figure under `scope` (a CSS selector; default the main area), as the browser holds it: the resolved
# layout (gd._fullLayout: axis types, tick values and texts, titles), the strings of every trace (coordinates,
# text, hover data) and what the SVG shows (tick label text, its font size in px, the spec text it was drawn from).
FIGURES_JS = """(scope) => {
  const root = document.querySelector(scope || '[data-testid="stMain"]') || document;
  const list = v => (v == null ? [] : (typeof v === 'string' ? [v] : Array.from(v)));
  const strings = v => {
    const out = [];
    const walk = x => {
      if (x == null) return;
      if (typeof x === 'string') out.push(x);
      else if (Array.isArray(x) || ArrayBuffer.isView(x)) { for (const y of Array.from(x)) walk(y); }
      else if (typeof x === 'object') { for (const y of Object.values(x)) walk(y); }
    };
    walk(v);
    return out;
  };
  return [...root.querySelectorAll('[data-testid="stPlotlyChart"]')].map(chart => {
    const gd = chart.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout;
    const holder = chart.closest('[class*="st-key-"]');
    const key = holder ? [...holder.classList].find(c => c.startsWith('st-key-')).slice(7) : null;
    const axes = Object.keys(fl).filter(k => /^[xy]axis\\d*$/.test(k)).map(name => {
      const a = fl[name];
      const ticks = [...gd.querySelectorAll('g.' + a._id + 'tick > text')].map(t => ({
        shown: t.textContent, spec: t.__data__ && t.__data__.text != null ? String(t.__data__.text) : null,
        font_px: parseFloat(getComputedStyle(t).fontSize)}));
      return {name, id: a._id, type: a.type, tickmode: a.tickmode || null, tickvals: list(a.tickvals),
              ticktext: list(a.ticktext).map(String), categories: list(a._categories).map(String),
              title: (a.title && a.title.text) || '', ticks};
    });
    const traces = gd._fullData.map(t => ({
      type: t.type, xaxis: t.xaxis || null, yaxis: t.yaxis || null, name: t.name || '',
      x_strings: list(t.x).filter(v => typeof v === 'string'), y_strings: list(t.y).filter(v => typeof v === 'string'),
      hovertemplate: strings(t.hovertemplate), texttemplate: strings(t.texttemplate),
      values: strings([t.text, t.hovertext, t.customdata, t.labels, t.ids, t.parents])}));
    const title = fl.title && fl.title.text || '';
    const shownTitle = chart.querySelector('.gtitle');
    return {key, title, title_shown: shownTitle ? shownTitle.textContent : '', axes, traces,
            annotations: (fl.annotations || []).map(a => String(a.text || ''))};
  });
}"""

# One figure's identity, for "same chart": its title and a hash (FNV-1a) of every trace's data and the layout's
# title and tick texts. `key` is the widget key of its st.plotly_chart (None: the first chart in the main area).
FIGURE_DIGEST_JS = """(key) => {
  const chart = key ? document.querySelector('.st-key-' + CSS.escape(key) + ' [data-testid="stPlotlyChart"]')
                    : document.querySelector('[data-testid="stMain"] [data-testid="stPlotlyChart"]');
  if (!chart) return null;
  const gd = chart.querySelector('.js-plotly-plot');
  const fields = ['type', 'x', 'y', 'z', 'text', 'customdata', 'labels', 'values', 'parents', 'ids', 'name'];
  const plain = v => (ArrayBuffer.isView(v) ? Array.from(v) : (Array.isArray(v) ? v.map(plain) : v));
  const data = gd.data.map(t => fields.map(f => plain(t[f])));
  const axes = Object.keys(gd.layout).filter(k => /^[xy]axis\\d*$/.test(k)).sort()
    .map(k => [k, gd.layout[k].ticktext || null]);
  const title = gd.layout.title ? (gd.layout.title.text || gd.layout.title) : '';
  const text = JSON.stringify([title, axes, data]);
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
  return {title: String(title), hash: h.toString(16), chars: text.length, traces: data.length};
}"""

# What each widget (by its key: the element's st-key-<key> class) shows: a slider's value(s) (aria-valuetext), a
# switch's or checkbox's state, a selectbox's or number box's text, the checked options of a segmented control or
# pills, the open tab, a text area's text. None when the widget is not on the page.
CONTROLS_JS = """(keys) => Object.fromEntries(keys.map(k => {
  const el = document.querySelector('.st-key-' + CSS.escape(k));
  if (!el) return [k, null];
  const tabs = [...el.querySelectorAll('[role="tab"]')];
  if (tabs.length) return [k, {tab: (tabs.find(t => t.getAttribute('aria-selected') === 'true') || {}).textContent}];
  const ranges = [...el.querySelectorAll('input[type="range"]')];
  if (ranges.length) return [k, {slider: ranges.map(r => r.getAttribute('aria-valuetext') || r.value)}];
  const box = el.querySelector('input[type="checkbox"]');
  if (box) return [k, {checked: box.checked}];
  const combo = el.querySelector('input[role="combobox"]');
  if (combo) return [k, {selected: combo.value}];
  const area = el.querySelector('textarea');
  if (area) return [k, {text: area.value}];
  const number = el.querySelector('input[type="number"]');
  if (number) return [k, {number: number.value}];
  const options = [...el.querySelectorAll('button[role="radio"], button[role="checkbox"], button[aria-pressed]')];
  if (options.length) return [k, {options: options.filter(b => b.getAttribute('aria-checked') === 'true' ||
                                                              b.getAttribute('aria-pressed') === 'true')
                                                 .map(b => b.textContent)}];
  return [k, {unknown: el.textContent}];
}))"""


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(root: Path, port: int, log) -> subprocess.Popen:
    """`streamlit run app.py` on 127.0.0.1:port in its own session (stop it with stop_app), output to `log`. The file
    watcher is off, so files edited while it runs do not put a "Source file changed" prompt on the page."""
    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.runOnSave", "false",
         "--server.fileWatcherType", "none"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(proc: subprocess.Popen, base: str, timeout_s: float) -> str | None:
    """None once base/_stcore/health answers 200, else why not (the process exited, or the time ran out)."""
    return wait_answering(lambda: None if proc.poll() is None else f"streamlit exited with {proc.returncode}",
                          base, timeout_s)


def wait_answering(gone: Callable[[], str | None], base: str, timeout_s: float) -> str | None:
    """None once base/_stcore/health answers 200, else why not: gone()'s reason the server is gone, or the time ran
    out."""
    deadline = time.monotonic() + timeout_s
    while True:
        why = gone()
        if why:
            return why
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
                if r.status == 200:
                    return None
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            return f"streamlit not healthy after {timeout_s:.0f} s"
        time.sleep(0.5)


def stop_app(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, the server's whole process group (start_app starts it in its own session)."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def running_app(root: Path, log_path: Path, timeout_s: float) -> Iterator[tuple[subprocess.Popen, str]]:
    """start_app on a free port, output to log_path: (the process, its base URL) once healthy; stopped afterwards.
    Raises with the log's tail if it never answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = start_app(root, port, log)
        try:
            why = wait_healthy(proc, url, timeout_s)
            if why:
                raise RuntimeError(f"{why}:\n{log_path.read_text(errors='replace')[-3000:]}")
            yield proc, url
        finally:
            stop_app(proc)


def open_view(page, url: str, min_charts: int = 1) -> None:
    """Go to url and wait until the app is idle with min_charts charts drawn (the first run may load the model)."""
    page.goto(url)
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=min_charts, timeout=FIRST_LOAD_MS, polling=100)


def visit(page, url: str, min_charts: int = 1) -> None:
    """open_view, by the tab's history when the tab already shows the app (a context with RUN_COUNTER_INIT_JS) and
    the URL has a query: the URL pushed, then the popstate the browser sends on Back / Forward. The app opens that
    link as a fresh session would (app_pages/frame/shell.reopen_link_on_history_navigation; an address with no query
    keeps the session's settings there, so it is loaded), in this session and without loading the page again:
    Chromium spends about half the CPU of a page load (1.25 vs 2.55 CPU-s a view: bench/bench_history.py)."""
    here, there = urllib.parse.urlsplit(page.url), urllib.parse.urlsplit(url)
    if ((here.scheme, here.netloc) != (there.scheme, there.netloc) or not there.query
            or page.evaluate("window.__stRuns") is None):
        open_view(page, url, min_charts)
        return
    runs = page.evaluate("window.__stRuns")
    page.evaluate(HISTORY_GO_JS, url)
    page.wait_for_function(RERUN_DONE_JS, arg=[runs, min_charts], timeout=FIRST_LOAD_MS, polling=100)
