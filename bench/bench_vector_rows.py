"""Drawing the block walk's vector rows in Chromium: one filled step line per row (viz.inside.vectors_figure) against
the n bars a row used to be, side by side in one browser.

Each figure is drawn with plotly.js (the copy the plotly package ships) in a 1024x768 headless Chromium page, from
the same arrays: the rows of the SwiGLU step at SmolLM2's size (4 rows of 1,536 channels) and of a norm step (4 rows
of 576 dimensions). Prints, per figure and way, the median over the rounds of the wall time of Plotly.newPlot and
Chromium's CPU-seconds (every chromium process, from /proc), and the ratio of the step line's to the bars'.

Run (from the repository root): python -m bench.bench_vector_rows [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import plotly.graph_objects as go
from playwright.sync_api import sync_playwright
from plotly.offline import get_plotlyjs

from bench.bench_history import chromium_cpu_s
from bench.class_swarm import cpu_name
from harness.browser import CHROMIUM, CHROMIUM_ARGS
from viz import inside as vi

SHAPES = {"SwiGLU step, 4 x 1,536": (4, 1536), "norm step, 4 x 576": (4, 576)}
DRAW_JS = """async (spec) => { const el = document.getElementById('fig'); Plotly.purge(el);
  const t = performance.now(); await Plotly.newPlot(el, spec.data, spec.layout);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); return performance.now() - t; }"""


def as_bars(fig: go.Figure) -> go.Figure:
    """The same figure with each row drawn as bars of width 1 and no gap: the figure before it was a step line."""
    bars = [go.Bar(x=t.x, y=t.y, xaxis=t.xaxis, yaxis=t.yaxis, name=t.name, hovertemplate=t.hovertemplate,
                   marker=dict(color=t.line.color, line=dict(width=0))) for t in fig.data]
    return go.Figure(data=bars, layout=fig.layout).update_layout(bargap=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1024, "height": 768})
        page.set_content("<html><body><div id='fig' style='width:1000px'></div></body></html>")
        page.add_script_tag(content=get_plotlyjs())
        print(cpu_name())
        for name, (rows, n) in SHAPES.items():
            line = vi.vectors_figure({f"row {r}": rng.normal(size=n) for r in range(rows)}, row_px=70)
            ways = {"step line": json.loads(line.to_json()), "bars": json.loads(as_bars(line).to_json())}
            times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
            for _ in range(args.rounds):
                for way, spec in ways.items():
                    cpu = chromium_cpu_s()
                    wall = time.perf_counter()
                    page.evaluate(DRAW_JS, spec)
                    times[way].append((time.perf_counter() - wall, chromium_cpu_s() - cpu))
            med = {way: (statistics.median(t[0] for t in ts[1:]), statistics.median(t[1] for t in ts[1:]))
                   for way, ts in times.items()}
            for way, (wall, cpu) in med.items():
                print(f"  {name:24s} {way:9s} wall {wall * 1000:7.1f} ms, Chromium {cpu:.3f} CPU-s")
            print(f"  {name:24s} step line / bars: wall {med['step line'][0] / med['bars'][0]:.2f}x, "
                  f"CPU {med['step line'][1] / max(med['bars'][1], 1e-9):.2f}x")
        browser.close()


if __name__ == "__main__":
    main()
