"""What a user waits for, measured in a real (headless) Chromium against `streamlit run app.py`.

  (a) text submitted (Ctrl+Enter in the sidebar) -> its heatmap drawn, 64-token text, a new text every run
      (the model runs on it: nothing cached)                                              target <= 0.4 s
  (b) head slider moved -> the new head's heatmap drawn; same for the layer slider         target <= 0.25 s
  (c) "Whole model" tab opened on a 256-token text (trace cached) -> overview, selected-head
      preview and table drawn                                                              target <= 1.5 s
      (c') info: a new 256-token text submitted while the Whole model tab is open (model run + head scores)
  (d) cold start: `streamlit run` process started -> first heatmap drawn in a fresh browser target <= 4 s
      (d'') info: the first visitor of a server started WARM_WAIT_S earlier (the class arrives after the teacher
      started it): page opened in a fresh browser -> first heatmap drawn

"Drawn" = the app is idle (script not running, no "Running" status widget, no stale element, connected) AND every
plotly chart on the page has its SVG AND the figure that should change did change: its title is the new
"Layer L, head H" (b), or its token axis is the new text's (a), or the overview's figures are there (c).
Times are taken with the page's own clock (performance.now()) from just before the key press / click to the first
animation frame where the condition holds; (d) is wall-clock time in this script from Popen to that frame. The model
is loaded by a warm-up load before (a)-(c). The server runs with --server.fileWatcherType none, so files edited while
it runs do not put a "Source file changed" prompt in the status widget.
Medians of --runs runs (default 7; (d): --cold-runs, default 5). Needs /usr/bin/chromium and `pip install playwright`.

Run (from the repository root): python -m bench.bench_ui [--runs 7] [--cold-runs 5]
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

from harness.browser import CHROMIUM, CHROMIUM_ARGS, IDLE_WITH_CHARTS_JS, free_port

ROOT = Path(__file__).resolve().parents[1]

TIMEOUT_MS = 180_000
WARM_WAIT_S = 15.0     # (d''): a server started this long before its first visitor (its warm-up is done)
FILLER = ("the robot looked at the stars every night and hoped that one day it could fly up to visit them while "
          "the old man sat by the window and read a book about the sea").split()

# wraps IDLE_WITH_CHARTS_JS: performance.now() at the first frame where idle(min) and extra(arg) both hold
WAIT_JS = """([min, extra, arg]) => {
  const idle = """ + IDLE_WITH_CHARTS_JS + """;
  const more = new Function('arg', extra);
  return idle(min) && more(arg) ? performance.now() : false;
}"""
# the drawn plotly title texts
HAS_TITLE = """const want = arg; return [...document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle')]
  .some(t => t.textContent.trim() === want);"""
# the heatmap "Layer L, head H" has a token axis different from arg.old, its image is drawn, the URL has the text
HEATMAP_CHANGED = """
  const gd = [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
    .find(g => g.layout && g.layout.title && String(g.layout.title.text || '').includes(arg.title));
  if (!gd || !gd.data || !gd.data.length || !gd.querySelector('g.hm image')) return false;
  const title = gd.querySelector('.gtitle');
  if (!title || title.textContent.trim() !== arg.title) return false;
  if (String(gd.data[0].x) === arg.old) return false;
  return new URLSearchParams(location.search).get('text') === arg.text;"""
AXIS_JS = """(title) => {
  const gd = [...document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')]
    .find(g => g.layout && g.layout.title && String(g.layout.title.text || '').includes(title));
  return gd && gd.data && gd.data.length ? String(gd.data[0].x) : null;
}"""
DIAG_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return {script: app && app.getAttribute('data-test-script-state'),
    connection: app && app.getAttribute('data-test-connection-state'),
    status_widget: (document.querySelector('[data-testid="stStatusWidget"]') || {}).textContent,
    stale: document.querySelectorAll('[data-stale="true"]').length,
    charts: [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map(c => [
      !!c.querySelector('.main-svg'), (c.querySelector('.gtitle') || {}).textContent,
      ((c.querySelector('.js-plotly-plot') || {}).data || [{}])[0].x?.length]),
    exceptions: document.querySelectorAll('[data-testid="stException"]').length,
    url_text_chars: (new URLSearchParams(location.search).get('text') || '').length,
    url: location.pathname + '?' + [...new URLSearchParams(location.search)].filter(([k]) => k !== 'text')
      .map(([k, v]) => k + '=' + v).join('&')};
}"""
OVERVIEW_SHOWN = """const want = arg;
  const titles = [...document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle')].map(t => t.textContent.trim());
  return titles.includes(want) && titles.length >= 2 &&
    !!document.querySelector('[data-testid="stDataFrame"]');"""


# ------------------------------------------------------------------------------------------------- the server
class Server:
    """`streamlit run app.py` in its own process group; stop() kills the group."""

    def __init__(self, log_dir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (log_dir / f"streamlit_{self.port}.log").open("wb")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.runOnSave", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_healthy(self, timeout_s: float = 90) -> float:
        """Seconds from process start to /_stcore/health answering."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode} (log: {self.log.name})")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - self.started
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"streamlit not healthy after {timeout_s} s (log: {self.log.name})")

    def stop(self) -> None:
        for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=wait_s)
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        self.log.close()


# ------------------------------------------------------------------------------------------------ page helpers
def wait_until(page, min_charts: int, extra: str = "return true;", arg=None, timeout_ms: int = TIMEOUT_MS) -> float:
    """performance.now() (ms) of the first animation frame where the page is idle with charts and extra(arg)."""
    try:
        handle = page.wait_for_function(WAIT_JS, arg=[min_charts, extra, arg], polling="raf", timeout=timeout_ms)
    except PlaywrightTimeoutError as err:
        raise RuntimeError(f"timed out waiting for {extra!r} with {arg!r}; page: {page.evaluate(DIAG_JS)}") from err
    return float(handle.json_value())


def now_ms(page) -> float:
    return float(page.evaluate("performance.now()"))


def sidebar_tokens(page) -> int:
    caption = page.locator('[data-testid="stSidebar"]').get_by_text(re.compile(r"\d+ / \d+ tokens")).inner_text()
    return int(caption.split("/")[0].strip())


def make_text(run: int, n_words: int) -> str:
    """A text whose token count does not depend on run (digits are one token each)."""
    words = [FILLER[i % len(FILLER)] for i in range(n_words)]
    return f"Run number {run:04d}: " + " ".join(words) + "."


def submit_text(page, text: str, heatmap_title: str) -> float:
    """Type text into the sidebar, Ctrl+Enter; seconds until the heatmap titled heatmap_title shows it."""
    old = page.evaluate(AXIS_JS, heatmap_title)
    area = page.locator('[data-testid="stSidebar"] textarea')
    area.fill(text)
    t0 = now_ms(page)
    area.press("Control+Enter")
    t1 = wait_until(page, 1, HEATMAP_CHANGED, {"title": heatmap_title, "old": old, "text": text})
    return (t1 - t0) / 1000


def calibrate(page, n_tokens: int, counter: list[int], heatmap_title: str) -> int:
    """The number of filler words that makes make_text() exactly n_tokens tokens (read from the sidebar)."""
    n_words = n_tokens - 8
    for _ in range(6):
        counter[0] += 1
        submit_text(page, make_text(counter[0], n_words), heatmap_title)
        got = sidebar_tokens(page)
        if got == n_tokens:
            return n_words
        n_words += n_tokens - got
    raise RuntimeError(f"could not make a {n_tokens}-token text (last: {got} tokens with {n_words} words)")


def move_slider(page, label: str, key: str, title: str) -> float:
    """Press key on the sidebar slider `label`; seconds until the heatmap titled `title` is drawn and idle."""
    slider = page.locator(f'[data-testid="stSidebar"] input[type="range"][aria-label="{label}"]')
    slider.focus()
    t0 = now_ms(page)
    slider.press(key)
    return (wait_until(page, 1, HAS_TITLE, title) - t0) / 1000


def open_tab(page, label: str, min_charts: int, extra: str, arg) -> float:
    tab = page.locator('[data-testid="stTab"]', has_text=label)
    t0 = now_ms(page)
    tab.click()
    return (wait_until(page, min_charts, extra, arg) - t0) / 1000


# ---------------------------------------------------------------------------------------------------- benches
def warm_benches(browser, runs: int, log_dir: Path) -> dict[str, list[float]]:
    server = Server(log_dir)
    results: dict[str, list[float]] = {}
    try:
        server.wait_healthy()
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(server.url)                                   # warm-up: loads the model, first trace
        wait_until(page, 1, HAS_TITLE, "Layer 0, head 0")
        counter = [0]
        title = "Layer 0, head 0"

        words64 = calibrate(page, 64, counter, title)
        times = []
        for _ in range(runs):
            counter[0] += 1
            times.append(submit_text(page, make_text(counter[0], words64), title))
            assert sidebar_tokens(page) == 64
        results["a"] = times

        pos = {"Layer": 0, "Head": 0}                           # alternate 0 -> 1 -> 0 ...

        def step(label: str) -> float:
            key = "ArrowLeft" if pos[label] else "ArrowRight"
            pos[label] = 1 - pos[label]
            return move_slider(page, label, key, f"Layer {pos['Layer']}, head {pos['Head']}")

        results["b_head"] = [step("Head") for _ in range(runs)]
        results["b_layer"] = [step("Layer") for _ in range(runs)]
        for label in ("Head", "Layer"):                         # back to layer 0, head 0
            if pos[label]:
                step(label)

        words256 = calibrate(page, 256, counter, title)
        preview = "Selected: layer 0, head 0"
        one_head = ("One head", 1, HAS_TITLE, title)
        whole = ("Whole model", 2, OVERVIEW_SHOWN, preview)
        open_tab(page, *whole)                                  # head scores of this text: computed once
        times = []
        for _ in range(runs):
            open_tab(page, *one_head)
            times.append(open_tab(page, *whole))
        results["c"] = times

        times = []                                              # new text while the overview is open
        for _ in range(runs):
            counter[0] += 1
            times.append(submit_text(page, make_text(counter[0], words256), preview))
            assert sidebar_tokens(page) == 256
        results["c_new"] = times
        context.close()
    finally:
        server.stop()
    return results


def first_heatmaps(browser, runs: int, log_dir: Path, open_after_s: float = 0.0) -> list[tuple[float, float, float]]:
    """Per run, a fresh server and a fresh browser that opens the page open_after_s after the process started (at
    health if that is later): (process start -> health OK, process start -> first heatmap drawn, page opened ->
    first heatmap drawn), seconds."""
    out = []
    for _ in range(runs):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto("about:blank")
        server = Server(log_dir)
        try:
            healthy = server.wait_healthy()
            time.sleep(max(0.0, open_after_s - (time.perf_counter() - server.started)))
            opened = time.perf_counter()
            page.goto(server.url)
            wait_until(page, 1, HAS_TITLE, "Layer 0, head 0")
            drawn = time.perf_counter()
            out.append((healthy, drawn - server.started, drawn - opened))
        finally:
            server.stop()
            context.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="runs of (a)-(c) (median; at least 5)")
    ap.add_argument("--cold-runs", type=int, default=5, help="cold starts for (d) (median; 0 to skip)")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"needs Debian's chromium at {CHROMIUM}")
    log_dir = Path(tempfile.mkdtemp(prefix="bench_ui_"))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            warm = warm_benches(browser, max(1, args.runs), log_dir)
            cold = first_heatmaps(browser, args.cold_runs, log_dir)
            visits = first_heatmaps(browser, args.cold_runs, log_dir, open_after_s=WARM_WAIT_S)
        finally:
            browser.close()

    rows = [
        ("(a) text submitted -> heatmap, 64 tokens (model runs)", warm["a"], 0.4),
        ("(b) head switched -> heatmap", warm["b_head"], 0.25),
        ("(b) layer switched -> heatmap", warm["b_layer"], 0.25),
        ("(c) Whole model tab opened, 256 tokens", warm["c"], 1.5),
        ("(c') new 256-token text on Whole model (info)", warm["c_new"], None),
    ]
    if cold:
        rows += [("(d) cold start: process -> first heatmap", [run[1] for run in cold], 4.0),
                 ("(d') cold start: process -> /_stcore/health (info)", [run[0] for run in cold], None),
                 (f"(d'') first visit, server started {WARM_WAIT_S:g} s before (info)", [run[2] for run in visits],
                  None)]
    print(f"\nbench_ui: real Chromium, Streamlit app, {os.cpu_count()} CPU cores visible; medians (min-max), seconds")
    print(f"{'measure':<56} {'runs':>4} {'median':>7} {'min':>6} {'max':>6} {'target':>7}  ok")
    for name, values, target in rows:
        med = statistics.median(values)
        ok = "" if target is None else ("yes" if med <= target else "NO")
        tgt = "-" if target is None else f"<={target:g}"
        print(f"{name:<56} {len(values):>4} {med:>7.3f} {min(values):>6.3f} {max(values):>6.3f} {tgt:>7}  {ok}")
    print(f"(server logs: {log_dir})")


if __name__ == "__main__":
    main()
