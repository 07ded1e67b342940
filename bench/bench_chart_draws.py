"""Streamlit's chart as it wrote it vs mended (server/frontend_mends.py: each figure drawn once), in headless Chromium.

One `streamlit run app.py`, two browser contexts at 1024x768 walking the same views by the tab's history, in turn:
one gets the PlotlyChart chunk as Streamlit ships it (the request answered from Streamlit's static folder), the
other as this server sends it, mended. Prints, per way and round, Chromium's CPU-seconds per view (every chromium
process, from /proc: what a student's laptop spends), the wall time per view, and plotly's draws per chart (its
`plotly_react` events); then the medians over the rounds after the first (the first fills the server's caches).

Run (from the repository root): python -m bench.bench_chart_draws [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright
from streamlit import file_util

from bench.bench_history import chromium_cpu_s
from bench.class_swarm import cpu_name
from harness.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    COUNT_DRAWS_INIT_JS,
    RUN_COUNTER_INIT_JS,
    open_view,
    running_app,
    visit,
)

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The quick brown fox jumps over the lazy dog"
VIEWS = ("/?view=head", "/?view=layer", "/?view=model", "/?view=query", "/?view=next", "/causal-mask?layer=2",
         "/softmax?temp=1", "/softmax?source=attention", "/generate?n=6", "/inside?view=tokens",
         "/inside?view=block", "/inside?view=stream", "/inside?view=lens", "/inside?view=heads",
         "/positional?view=sin", "/positional?view=rope", "/positional?view=model", "/positional?view=alibi",
         "/parameters?preset=gpt2", "/efficient?view=flash", "/efficient?view=masks", "/efficient?view=linear",
         "/circuits?view=roles", "/circuits?view=patching", "/circuits?view=attribution")
# (charts in the main area, Plotly.react calls on them)
DRAWS_JS = """() => { const gds = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')];
  return [gds.length, gds.reduce((n, gd) => n + (gd.__draws?.plotly_react || 0), 0)]; }"""


def as_streamlit_ships_it(context) -> None:
    """The context's requests for the PlotlyChart chunk answered with Streamlit's own file."""
    chunk = next((Path(file_util.get_static_dir()) / "static" / "js").glob("PlotlyChart.*.js"))
    body = chunk.read_bytes()
    context.route(f"**/static/js/{chunk.name}",
                  lambda route: route.fulfill(status=200, body=body, content_type="text/javascript"))


def walk(page, url: str) -> tuple[float, float, float]:
    """(wall s, Chromium CPU-s, plotly draws per chart) per view over VIEWS."""
    wall, chromium, draws, charts = time.perf_counter(), chromium_cpu_s(), 0, 0
    for view in VIEWS:
        visit(page, f"{url}{view}&text={TEXT.replace(' ', '+')}")
        page.wait_for_timeout(300)                          # a second draw comes within a frame or two
        shown, drawn = page.evaluate(DRAWS_JS)
        charts, draws = charts + shown, draws + drawn
    n = len(VIEWS)
    return (time.perf_counter() - wall) / n, (chromium_cpu_s() - chromium) / n, draws / max(charts, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ways = ("as shipped", "mended")
    results: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
    with running_app(ROOT, Path(tempfile.mkdtemp()) / "server.log", 120) as (_, url), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pages = {}
        for way in ways:
            context = browser.new_context(viewport={"width": 1024, "height": 768})
            context.add_init_script(RUN_COUNTER_INIT_JS)
            context.add_init_script(COUNT_DRAWS_INIT_JS)
            if way == "as shipped":
                as_streamlit_ships_it(context)
            pages[way] = context.new_page()
            open_view(pages[way], url + "/")
        for round_ in range(args.rounds):
            for way in ways:
                row = walk(pages[way], url)
                results[way].append(row)
                print(f"round {round_} {way:10s} per view: wall {row[0]:.2f} s, Chromium {row[1]:.2f} CPU-s; "
                      f"{row[2]:.2f} draws per chart", flush=True)
        browser.close()
    print(f"\n{cpu_name()}; medians over rounds 1-{args.rounds - 1} ({len(VIEWS)} views each):")
    medians = {}
    for way, rows in results.items():
        kept = rows[1:] or rows
        medians[way] = [statistics.median(r[i] for r in kept) for i in range(3)]
        print(f"  {way:10s} wall {medians[way][0]:.2f} s, Chromium {medians[way][1]:.2f} CPU-s per view; "
              f"{medians[way][2]:.2f} draws per chart")
    print(f"  mended / as shipped: Chromium CPU {medians['mended'][1] / medians['as shipped'][1]:.2f}x, "
          f"wall {medians['mended'][0] / medians['as shipped'][0]:.2f}x")


if __name__ == "__main__":
    main()
