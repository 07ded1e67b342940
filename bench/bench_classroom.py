"""A class of students on one server: N headless Chromium sessions open the app at once.

For N in --sessions (default 10 and 30), against one `streamlit run app.py` (model loaded by one warm-up visit):
  distinct  every student opens the app with their own short text (~60 tokens): the model runs N times
  shared    every student opens the same example text: one trace, shared
  long      (--long) every student opens their own ~500-token text: the memory case
  generate  (--generate) every student opens Generate on their own prompt at once (32 new tokens, greedy): the
            generations share each decoding step (model.decoder.batching); time to the written text on screen
and prints, per case: the server's CPU-seconds per session (utime + stime of the server process, all threads,
from /proc), its peak RSS (sampled every 50 ms), the time from navigation to the first heatmap drawn (median, max),
and the p95 latency of a head switch (ArrowRight on the head slider) made by every student at once, --switches
rounds. The browsers run on the same 2 cores as the server, so these wall-clock times are pessimistic for a real
classroom (one browser per student machine); the CPU-seconds are the server's alone.

Run (from the repository root): python -m bench.bench_classroom [--sessions 10 30] [--switches 3] [--long]
[--generate | --only-generate]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import sync_playwright

from bench.bench_ui import Server
from tests.e2e.browser_harness import CHROMIUM, CHROMIUM_ARGS, IDLE_WITH_CHARTS_JS

TIMEOUT_S = 600
WORDS = ("apple river cloud stone music paper garden window silver forest candle ocean mirror thunder violet "
         "harbor lantern pepper meadow copper").split()
# In every page: a requestAnimationFrame loop that records performance.now() (ms since navigation) the first time
# the app is idle with its chart drawn and a figure title equals window.__want.
OBSERVER_JS = """(() => {
  const idle = """ + IDLE_WITH_CHARTS_JS + """;
  window.__want = 'Layer 0, head 0';
  window.__doneAt = null;
  const tick = () => {
    if (window.__doneAt === null && window.__want) {
      const titles = [...document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle')]
        .map(t => t.textContent.trim());
      if (idle(1) && titles.includes(window.__want)) window.__doneAt = performance.now();
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();"""


# Generate: the first time the app is idle with the written text and its candidates chart on screen.
GENERATED_OBSERVER_JS = """(() => {
  const idle = """ + IDLE_WITH_CHARTS_JS + """;
  window.__doneAt = null;
  const tick = () => {
    if (window.__doneAt === null && document.querySelector('.st-key-gen_text') && idle(1)) {
      window.__doneAt = performance.now();
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();"""
GENERATED_TOKENS = 32


def text_for(student: int, n_words: int) -> str:
    words = [WORDS[(student * 7 + i * 3) % len(WORDS)] for i in range(n_words)]
    return f"Student {student:03d} wrote: " + " ".join(words) + "."


class ServerProbe:
    """CPU-seconds and peak RSS of the server process, read from /proc while a case runs."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100.0             # utime + stime in clock ticks (100 Hz)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, self.rss_mb())
            time.sleep(0.05)

    def __enter__(self) -> ServerProbe:
        self.cpu_start = self.cpu_s()
        self.peak_mb = self.rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.cpu_used = self.cpu_s() - self.cpu_start


def wait_all(pages, timeout_s: float = TIMEOUT_S) -> list[float]:
    """Seconds from navigation (or from window.__t0, for a switch) until each page's observer fired."""
    deadline = time.monotonic() + timeout_s
    out = []
    for page in pages:
        while True:
            done = page.evaluate("[window.__doneAt, window.__t0 || 0]")
            if done[0] is not None:
                out.append((done[0] - done[1]) / 1000)
                break
            if time.monotonic() > deadline:
                raise RuntimeError("a session did not show its heatmap in time")
            time.sleep(0.05)
    return out


def open_class(browser, url: str, texts: list[str], page_path: str = "/", observer: str = OBSERVER_JS):
    """One context per student, all navigating at once to page_path with their text; returns their pages."""
    pages = []
    for text in texts:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.add_init_script(observer)
        page = context.new_page()
        page.goto(f"{url}{page_path}{'&' if '?' in page_path else '?'}text={quote(text)}", wait_until="commit")
        pages.append(page)
    return pages


def switch_heads(pages, rounds: int) -> list[float]:
    """Every student moves the head slider one step at once, rounds times: each switch's seconds."""
    out = []
    for r in range(rounds):
        head = r + 1
        for page in pages:
            slider = page.locator('[data-testid="stSidebar"] input[type="range"][aria-label="Head"]')
            slider.focus()
            page.evaluate(f"window.__want = 'Layer 0, head {head}'; window.__doneAt = null; "
                          "window.__t0 = performance.now()")
            slider.press("ArrowRight")
        out += wait_all(pages)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def run_case(browser, server: Server, name: str, texts: list[str], switches: int, generate: bool = False) -> dict:
    with ServerProbe(server.proc.pid) as probe:
        pages = (open_class(browser, server.url, texts, f"/generate?n={GENERATED_TOKENS}&greedy=1",
                            GENERATED_OBSERVER_JS) if generate else open_class(browser, server.url, texts))
        first = wait_all(pages)
        cpu_first = probe.cpu_s() - probe.cpu_start
        switch = switch_heads(pages, switches) if switches else []
    for page in pages:
        page.context.close()
    return dict(case=name, n=len(texts), cpu_per_session=cpu_first / len(texts), peak_mb=probe.peak_mb,
                first_median=statistics.median(first), first_max=max(first),
                switch_p95=p95(switch) if switch else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[10, 30])
    ap.add_argument("--switches", type=int, default=3, help="rounds of simultaneous head switches per case")
    ap.add_argument("--long", action="store_true", help="also the ~500-token texts case (memory)")
    ap.add_argument("--generate", action="store_true", help="also every student generating at once")
    ap.add_argument("--only-generate", action="store_true", help="only the generate case")
    args = ap.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="bench_classroom_"))
    print("bench_classroom: one server, N Chromium sessions at once (browsers share the server's 2 cores)")
    print(f"{'case':<22} {'N':>3} {'server CPU s/session':>21} {'peak RSS MB':>12} {'first heatmap s':>18} "
          f"{'head switch p95 s':>18}", flush=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for k, n in enumerate(args.sessions):
            server = Server(log_dir)
            try:
                server.wait_healthy()
                warm = open_class(browser, server.url, ["Warming up the model."])
                wait_all(warm)
                warm[0].context.close()
                base = k * 1000
                cases = [] if args.only_generate else [
                    ("distinct ~60 tokens", [text_for(base + i, 48) for i in range(n)], args.switches, False),
                    ("shared example", ["The little robot looked at the stars."] * n, args.switches, False)]
                if args.long and not args.only_generate:
                    cases.append(("distinct ~500 tokens", [text_for(base + 500 + i, 480) for i in range(n)], 0,
                                  False))
                if args.generate or args.only_generate:
                    cases.append((f"generate {GENERATED_TOKENS} tokens", [text_for(base + 700 + i, 12)
                                                                           for i in range(n)], 0, True))
                for name, texts, switches, generate in cases:
                    r = run_case(browser, server, name, texts, switches, generate)
                    print(f"{r['case']:<22} {r['n']:>3} {r['cpu_per_session']:>21.3f} {r['peak_mb']:>12.0f} "
                          f"{r['first_median']:>8.2f} / {r['first_max']:<7.2f} {r['switch_p95']:>18.2f}", flush=True)
            finally:
                server.stop()
        browser.close()
    print("(first heatmap: median / max; server logs in", log_dir, ")")


if __name__ == "__main__":
    main()
