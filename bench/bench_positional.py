"""Server time of every figure-building path of the Positional encodings page (budget: 0.5 s per control change).

Each path = the page's builder (arrays + plotly figures) + what st.plotly_chart does with each figure (Plotly's
figure check and JSON). "cold": the page's st.cache_data array caches cleared before every run; "warm": cached.
Median of --runs runs (default 7). Run: python bench/bench_positional.py
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import logging  # noqa: E402

logging.getLogger("streamlit").setLevel(logging.ERROR)

import plotly.graph_objects as go  # noqa: E402
import plotly.io as pio  # noqa: E402
import plotly.tools  # noqa: E402

from app_pages import positional as page  # noqa: E402
from model import load_model  # noqa: E402

BUDGET_S = 0.5
LONG_TEXT = ("Rotary position embeddings rotate each pair of query and key dimensions by an angle that grows with "
             "the token's position. ") * 40


def ship(obj) -> int:
    """What st.plotly_chart does with every figure in obj: check it, then serialise to JSON. Returns bytes sent."""
    figs = [v for v in (obj.values() if isinstance(obj, dict) else obj) if isinstance(v, (go.Figure, list))]
    total = 0
    for f in figs:
        for fig in (f if isinstance(f, list) else [f]):
            fig = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
            total += len(pio.to_json(fig, validate=False))
    return total


def timed(fn, runs: int, clear=None) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(runs):
        if clear:
            clear()
        t0 = time.perf_counter()
        size = ship(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    lm = load_model()
    cfg = lm.config

    def clear():
        page.pe_view.clear()
        page.pe_relative.clear()

    rows = []
    for d, n_pos, base in ((128, 256, 10_000.0), (512, 1024, 10_000.0), (1024, 2048, 10_000.0),
                           (16, 2048, 1_000_000.0), (1024, 16, 100.0)):
        dims = page.default_wave_dims(d)
        fn = lambda d=d, n_pos=n_pos, base=base, dims=dims: page.sinusoidal_figures(d, n_pos, base, dims)  # noqa
        for label, clr in (("cold", clear), ("warm", None)):
            t, size = timed(fn, args.runs, clr)
            rows.append((f"sinusoidal d={d} positions={n_pos} base={base:g} ({label})", t, size))

    for n_pos, pairs in ((64, (0, 16)), (512, (0, 31))):
        t, size = timed(lambda n_pos=n_pos, pairs=pairs: page.rope_theory_figures(
            cfg.head_dim, cfg.rope_theta, 1_000_000.0, pairs, n_pos, cfg.max_positions), args.runs)
        rows.append((f"RoPE theory: frequencies + 2 rotations ({n_pos} positions) + pairing", t, size))

    for text in ("The little robot looked at the stars every night, hoping that one day it could fly up.", LONG_TEXT):
        tr = lm.run(text)
        T = tr.n_tokens
        t_detail, _ = timed(lambda tr=tr: {"_": lm.layer_detail(tr, 20)} and {}, args.runs)
        rows.append((f"layer_detail (T={T}; cached per (text, layer) in the app)", t_detail, 0))
        detail = lm.layer_detail(tr, 20)
        for max_distance in (4096, 8192):
            for hide in (False, True):
                m = T - 1
                fn = lambda detail=detail, tr=tr, m=m, md=max_distance, hide=hide: page.model_figures(  # noqa
                    detail, tr.tokens, 4, cfg.group_size, cfg.head_dim, cfg.rope_theta, m, max(0, m - 3), md, hide,
                    max_shift=cfg.max_positions - 1 - m)
                t, size = timed(fn, args.runs)
                rows.append((f"RoPE in the model T={T} distances<={max_distance} hide_sink={hide}", t, size))

    width = max(len(r[0]) for r in rows)
    print(f"{'path':<{width}}  {'median s':>9}  {'JSON kB':>8}  budget {BUDGET_S} s")
    for name, t, size in rows:
        print(f"{name:<{width}}  {t:>9.3f}  {size / 1000:>8.0f}  {'ok' if t <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
