"""A class of students on one server: N headless Chromium sessions open the app at once.

For N in --sessions (default 10 and 30), against one `streamlit run app.py` (model loaded by one warm-up visit):
  distinct  every student opens the app with their own short text (~60 tokens): the model runs N times
  shared    every student opens the same example text: one trace, shared
  long      (--long) every student opens their own ~500-token text: the memory case
  generate  (--generate) with the app open on their own text, every student clicks Generate in the page menu at
            once (its defaults: 32 new tokens, T = 0.7): the generations share each decoding step
            (model.decoder.batching); times per student: text served, from the click's request reaching the
            server to the message that writes the text leaving it, and served, to the last message of that script
            run (the figures drawn after the text) leaving it (a proxy between each browser and the server sees
            them: the server's part, whatever the browsers' CPU); received, from the click
            to that run received by the browser's network layer; on screen, to the text drawn. With --together
            the proxies hold the clicks' requests until all have come and send them at once (starved browsers
            click late: the requests otherwise arrive over seconds)
and prints, per case: the server's CPU-seconds per session (utime + stime of the server process, all threads,
from /proc), its peak RSS (sampled every 50 ms), the time from navigation to the first heatmap drawn (median, max),
and the p95 latency of a head switch (ArrowRight on the head slider) made by every student at once, --switches
rounds. The browsers run on the same 2 cores as the server, at the lowest priority (nice 19 and SCHED_IDLE: the
server first, as when each student's browser runs on their own machine); their drawing still takes what the server
leaves, so the on-screen and received times are pessimistic for a real classroom (30 tabs' sockets are read by one
busy browser process). The CPU-seconds are the server's alone.

Run (from the repository root): python -m bench.bench_classroom [--sessions 10 30] [--switches 3] [--long]
[--generate | --only-generate] [--together]
"""
from __future__ import annotations

import argparse
import base64
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import sync_playwright
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from bench.bench_ui import Server
from bench.ws_tap import TO_SERVER, WebSocketTap
from harness.browser import CHROMIUM, CHROMIUM_ARGS, IDLE_WITH_CHARTS_JS

TIMEOUT_S = 600
WORDS = ("apple river cloud stone music paper garden window silver forest candle ocean mirror thunder violet "
         "harbor lantern pepper meadow copper").split()
# In every page: a 20 ms timer (not requestAnimationFrame, which makes every page draw 60 frames a second: ten idle
# pages cost half a core) that records performance.now() (ms since navigation) the first time
# the app is idle with its chart drawn and a figure title equals window.__want, or, when window.__want is
# GENERATED, the written text of the Generate page is on screen.
GENERATED = "#generated"
OBSERVER_JS = """(() => {
  const idle = """ + IDLE_WITH_CHARTS_JS + """;
  window.__want = 'Layer 0, head 0';
  window.__doneAt = null;
  const tick = () => {
    if (window.__doneAt === null && window.__want) {
      const titles = [...document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle')]
        .map(t => t.textContent.trim());
      const shown = window.__want === '""" + GENERATED + """' ? !!document.querySelector('.st-key-gen_text')
                                                      : titles.includes(window.__want);
      if (idle(1) && shown) window.__doneAt = performance.now();
    }
  };
  setInterval(tick, 20);
})();"""
GENERATED_TOKENS = 32


def niced_chromium(folder: Path) -> str:
    """A launcher running Chromium at the lowest CPU priority (nice 19 and SCHED_IDLE: a core only when the server
    leaves it idle): the server gets the cores first, as a class server
    does when the students' browsers run on their own machines; the browsers draw on what is left. With the
    kernel's autogroups (sched_autogroup_enabled), nice counts only inside a session's group and the server runs
    in its own session, so the launcher lowers the group its browsers run in too (/proc/self/autogroup)."""
    launcher = folder / "chromium-nice"
    launcher.write_text("#!/bin/sh\necho 19 > /proc/self/autogroup 2>/dev/null\n"
                        f'exec nice -n 19 chrt --idle 0 {CHROMIUM} "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


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


def open_class(browser, urls: list[str], texts: list[str]):
    """One context per student, all opening the app at once with their text (student i at urls[i]); returns their
    pages."""
    pages = []
    for url, text in zip(urls, texts, strict=True):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.add_init_script(OBSERVER_JS)
        page = context.new_page()
        page.goto(f"{url}/?text={quote(text)}", wait_until="commit")
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


class TextRunEnd:
    """Watches one page's ForwardMsgs for the script run that writes its generated text: `text` is true from the
    message that writes the text itself (the one after its container, gen_text), `is_end` at the first
    script_finished at or after it."""

    def __init__(self):
        self._seen_text = False
        self.text = False

    def is_end(self, data: bytes) -> bool:
        self.text = self.text or self._seen_text
        self._seen_text = self._seen_text or b"gen_text" in data
        if not self.text:
            return False
        message = ForwardMsg()
        message.ParseFromString(data)
        return message.WhichOneof("type") == "script_finished"


class Served:
    """When the server sent a page's generated text, the last message of the script run that writes it, and when it
    received the page's rerun request for it, as a WebSocketTap between the page and the server saw them: the
    server's part of what a student waits for, whatever the browsers' CPU."""

    def __init__(self):
        self.reset()

    def on_message(self, direction: str, at: float, opcode: int, data: bytes) -> None:
        if opcode != 2:
            return
        if direction == TO_SERVER:
            message = BackMsg()
            message.ParseFromString(data)
            if message.WhichOneof("type") == "rerun_script":
                self.reruns.append(at)
            return
        if self.at is None and self._end.is_end(data):
            self.at = at
        if self.text_at is None and self._end.text:
            self.text_at = at

    def reset(self) -> None:
        self.reruns: list[float] = []
        self.at: float | None = None           # the run writing the text ended
        self.text_at: float | None = None      # the text itself sent
        self._end = TextRunEnd()

    def asked_after(self, clicked_at: float) -> float:
        """When the first rerun request sent at or after the click (wall time) reached the server."""
        return min(t for t in self.reruns if t >= clicked_at - 0.01)


class TogetherClicks:
    """With --together, each page's tap holds the page's click request (its first rerun request once armed) until
    every page's has come, then all go to the server at once: a class pressing Generate in the same instant, however
    late the starved browsers click."""

    def __init__(self, n: int):
        self.barrier = threading.Barrier(n)
        self.armed = False

    def hold_for_page(self):
        """A tap's hold function (WebSocketTap's hold) for one page."""
        held = threading.Event()

        def hold(opcode: int, data: bytes) -> None:
            if not self.armed or held.is_set() or opcode != 2:
                return
            message = BackMsg()
            message.ParseFromString(data)
            if message.WhichOneof("type") == "rerun_script":
                held.set()
                self.barrier.wait(timeout=300)
        return hold


class Delivery:
    """When the script run that writes a page's generated text finished reaching that page's browser: the
    websocket frames as Chromium's network layer received them (DevTools' time stamps, CLOCK_MONOTONIC like
    time.monotonic), not when its busy renderer got round to them. With 30 tabs one browser process reads them all,
    late: Served has the server's part."""

    def __init__(self, page):
        self.at: float | None = None
        self._end = TextRunEnd()
        self._cdp = page.context.new_cdp_session(page)
        self._cdp.on("Network.webSocketFrameReceived", self._frame)
        self._cdp.send("Network.enable")

    def _frame(self, event: dict) -> None:
        response = event["response"]
        if self.at is not None or response["opcode"] != 2:
            return
        if self._end.is_end(base64.b64decode(response["payloadData"])):
            self.at = event["timestamp"]


def press_generate(pages, served: list[Served], together: TogetherClicks | None) -> tuple[list[float], list[float],
                                                                                         list[float], list[float],
                                                                                         float]:
    """Every student clicks Generate in the page menu at the same moment (its default: 32 new tokens, T = 0.7).
    Returns, per student, the seconds from the click's request reaching the server to the text sent and to the run
    writing it sent (Served), from the click to that run received by the browser (Delivery), and to the text drawn
    on screen; and the seconds between the first and the last request reaching the server. The clicks are set to
    one wall-clock time in every page beforehand (clicking page after page from here takes ~0.5 s a page while the
    browsers are busy), but a browser starved by the generations already running clicks late; `together` sends the
    requests to the server at once."""
    link = '[data-testid="stSidebarNav"] a[href$="/generate"]'
    for page in pages:
        page.locator(link).wait_for()
    deliveries = [Delivery(page) for page in pages]
    for record in served:
        record.reset()
    if together:
        together.armed = True
    at_ms = time.time() * 1000 + 500 + 50 * len(pages)
    for page in pages:
        page.evaluate("""([link, want, at]) => {
            window.__want = want; window.__doneAt = null;
            setTimeout(() => { window.__t0 = performance.now(); window.__clickedAt = Date.now();
                               document.querySelector(link).click(); }, at - Date.now());
        }""", [link, GENERATED, at_ms])
    drawn = wait_all(pages)
    wall_to_monotonic = time.monotonic() - time.time()
    delivered = []
    for page, delivery in zip(pages, deliveries, strict=True):
        while delivery.at is None:                 # frames are handed to Python while playwright is called
            page.wait_for_timeout(20)
        delivered.append(delivery.at - (page.evaluate("window.__clickedAt") / 1000 + wall_to_monotonic))
    text_sent, sent, asked = [], [], []
    for page, record in zip(pages, served, strict=True):
        while record.at is None:
            page.wait_for_timeout(20)
        asked.append(record.asked_after(page.evaluate("window.__clickedAt") / 1000))
        text_sent.append(record.text_at - asked[-1])
        sent.append(record.at - asked[-1])
    return text_sent, sent, delivered, drawn, max(asked) - min(asked)


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.95 * len(values))) - 1)]


def run_case(browser, server: Server, name: str, texts: list[str], switches: int, generate: bool = False,
             together: bool = False) -> dict:
    served, taps, clicks = [], [], TogetherClicks(len(texts)) if together else None
    if generate:                                     # the class has the app open; then everyone presses Generate
        served = [Served() for _ in texts]
        taps = [WebSocketTap(server.port, record.on_message, clicks.hold_for_page() if clicks else None)
                for record in served]
        pages = open_class(browser, [tap.url for tap in taps], texts)
        wait_all(pages)
    text_sent, sent, delivered, spread = [], [], [], float("nan")
    with ServerProbe(server.proc.pid) as probe:
        if generate:
            text_sent, sent, delivered, first, spread = press_generate(pages, served, clicks)
        else:
            pages = open_class(browser, [server.url] * len(texts), texts)
            first = wait_all(pages)
        cpu_first = probe.cpu_s() - probe.cpu_start
        switch = switch_heads(pages, switches) if switches else []
    for page in pages:
        page.context.close()
    for tap in taps:
        tap.close()
    return dict(case=name, n=len(texts), cpu_per_session=cpu_first / len(texts), peak_mb=probe.peak_mb,
                first_median=statistics.median(first), first_max=max(first),
                text=f"{statistics.median(text_sent):.2f} / {max(text_sent):.2f}" if text_sent else "-",
                served=f"{statistics.median(sent):.2f} / {max(sent):.2f}" if sent else "-", spread=spread,
                delivered=f"{statistics.median(delivered):.2f} / {max(delivered):.2f}" if delivered else "-",
                switch_p95=p95(switch) if switch else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[10, 30])
    ap.add_argument("--switches", type=int, default=3, help="rounds of simultaneous head switches per case")
    ap.add_argument("--long", action="store_true", help="also the ~500-token texts case (memory)")
    ap.add_argument("--generate", action="store_true", help="also every student generating at once")
    ap.add_argument("--only-generate", action="store_true", help="only the generate case")
    ap.add_argument("--together", action="store_true",
                    help="generating: hold the clicks' requests until all have come, then send them at once")
    args = ap.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="bench_classroom_"))
    print("bench_classroom: one server, N Chromium sessions at once (browsers share the server's 2 cores)")
    print(f"{'case':<22} {'N':>3} {'server CPU s/session':>21} {'peak RSS MB':>12} {'text served s':>14} "
          f"{'served s':>14} {'received s':>14} {'on screen s':>18} {'head switch p95 s':>18} "
          f"{'requests over s':>16}", flush=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=niced_chromium(log_dir), args=CHROMIUM_ARGS)
        for k, n in enumerate(args.sessions):
            server = Server(log_dir)
            try:
                server.wait_healthy()
                warm = open_class(browser, [server.url], ["Warming up the model."])
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
                    r = run_case(browser, server, name, texts, switches, generate, args.together)
                    print(f"{r['case']:<22} {r['n']:>3} {r['cpu_per_session']:>21.3f} {r['peak_mb']:>12.0f} "
                          f"{r['text']:>14} {r['served']:>14} {r['delivered']:>14} "
                          f"{r['first_median']:>8.2f} / {r['first_max']:<7.2f} "
                          f"{r['switch_p95']:>18.2f} {r['spread']:>16.2f}", flush=True)
            finally:
                server.stop()
        browser.close()
    print("(median / max. on screen: from navigation to the first heatmap drawn or, generating, from the click to "
          "the written text drawn; text served: from the click's request reaching the server to the message writing "
          "the text sent; served: to the last message of the run that writes it sent (both seen by a proxy); "
          "received: from the click to that run received by the browser; "
          "requests over: from the first click's request reaching the server to the last's. "
          "Server logs in", log_dir, ")")


if __name__ == "__main__":
    main()
