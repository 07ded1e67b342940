"""A view opened by loading its link vs by the browser's history (Back / Forward), in headless Chromium.

One `streamlit run app.py`, one tab (1024x768). Every round walks the same views twice, side by side: once by
loading each link (page.goto: Streamlit's frontend starts again, a new session), once by the tab's history
(harness.browser.visit: the address pushed, then the popstate Back / Forward send; the app opens that link as a fresh
session would, app_pages/frame/shell.reopen_link_on_history_navigation). Prints, per way and round, the wall time
and Chromium's CPU-seconds (every chromium process, from /proc) per view, the server's CPU-seconds per view, and the
medians over the rounds after the first (the first fills the server's caches). The browser's CPU is what a
student's laptop spends, and what the browser tests spend on each view.

Run (from the repository root): python -m bench.bench_history [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from bench.bench_classroom import ServerProbe
from bench.class_swarm import cpu_name
from harness.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    IDLE_WITH_CHARTS_JS,
    RUN_COUNTER_INIT_JS,
    open_view,
    running_app,
    visit,
)

ROOT = Path(__file__).resolve().parents[1]
# Views with a query (an address without one keeps the session's settings on Back: it is loaded instead).
VIEWS = ("/?view=layer", "/?view=model", "/?view=query", "/?view=next", "/causal-mask?layer=2",
         "/softmax?source=attention", "/inside?view=block", "/inside?view=lens", "/positional?view=rope",
         "/positional?view=model", "/efficient?view=masks", "/circuits?view=attribution")


def chromium_cpu_s() -> float:
    """utime + stime of every chromium process now running, in seconds."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"chromium" in Path(f"/proc/{pid}/cmdline").read_bytes():
                total += ServerProbe(int(pid)).cpu_s()
        except OSError:                 # gone meanwhile
            continue
    return total


def walk(page, url: str, how: str) -> None:
    for view in VIEWS:
        if how == "load":
            page.goto(url + view)
            page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=1, timeout=180_000, polling=100)
        else:
            visit(page, url + view)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {"load": [], "history": []}
    with running_app(ROOT, Path(tempfile.mkdtemp()) / "server.log", 120) as (server, url), \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1024, "height": 768})
        context.add_init_script(RUN_COUNTER_INIT_JS)
        page = context.new_page()
        open_view(page, url + "/")
        for round_ in range(args.rounds):
            for how in results:
                wall, chromium = time.perf_counter(), chromium_cpu_s()
                with ServerProbe(server.pid) as served:
                    walk(page, url, how)
                n = len(VIEWS)
                row = ((time.perf_counter() - wall) / n, (chromium_cpu_s() - chromium) / n, served.cpu_used / n)
                results[how].append(row)
                print(f"round {round_} {how:8s} per view: wall {row[0]:.2f} s, Chromium {row[1]:.2f} CPU-s, "
                      f"server {row[2]:.3f} CPU-s", flush=True)
        browser.close()
    print(f"\n{cpu_name()}; medians over rounds 1-{args.rounds - 1} ({len(VIEWS)} views each):")
    for how, rows in results.items():
        kept = rows[1:] or rows
        print(f"  {how:8s} wall {statistics.median(r[0] for r in kept):.2f} s, Chromium "
              f"{statistics.median(r[1] for r in kept):.2f} CPU-s, server {statistics.median(r[2] for r in kept):.3f}"
              " CPU-s per view")


if __name__ == "__main__":
    main()
