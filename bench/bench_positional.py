"""Server time of every figure-building path of the Positional encodings page (budget: 0.5 s per control change).

Each path = the page's builder (arrays + plotly figures) + what st.plotly_chart does with each figure (Plotly's
figure check and JSON). "cold": the page's st.cache_data array caches cleared before every run; "warm": cached.
Median of --runs runs (default 7). Run (from the repository root): python -m bench.bench_positional
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

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


def timed(fn, runs: int, clear=None) -> tuple[float, float, int]:
    """(median wall s, median CPU s of this process, JSON bytes)."""
    times, cpu, size = [], [], 0
    for _ in range(runs):
        if clear:
            clear()
        t0, c0 = time.perf_counter(), time.process_time()
        size = ship(fn())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu), size


def page_reruns(runs: int) -> list[tuple[str, float, float, int]]:
    """Whole-page reruns in Streamlit's AppTest (app shell + this page), one control changed per rerun."""
    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[1] / "router.py")
    at = AppTest.from_file(app, default_timeout=120)
    at.query_params["page"] = "positional"
    at.run()

    def change(tab, action):
        at.session_state["pos_tab"] = tab
        at.run()
        times, cpu = [], []
        for i in range(runs):
            action(i)
            t0, c0 = time.perf_counter(), time.process_time()
            at.run()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            assert not at.exception, at.exception
        return statistics.median(times), statistics.median(cpu)

    tabs = page.TABS
    cases = [
        ("d_model (new value each run: cold cache)", tabs[0],
         lambda i: at.select_slider(key="pos_d_model").set_value(page.D_MODEL_OPTIONS[-1 - i % 12])),
        ("positions (2048 - 16 i: cold cache)", tabs[0],
         lambda i: at.slider(key="pos_n_positions").set_value(page.MAX_POSITIONS - 16 * i)),
        ("base 1e4 <-> 1e6", tabs[0], lambda i: at.select_slider(key="pos_base").set_value([10_000, 1_000_000][i % 2])),
        ("RoPE pair slider", tabs[1], lambda i: at.slider(key="pos_rot_pair_a").set_value(i % 32)),
        ("RoPE positions 64 <-> 512", tabs[1],
         lambda i: at.slider(key="pos_rot_positions").set_value([64, 512][i % 2])),
        ("model: key token n", tabs[2], lambda i: next(
            w for w in at.selectbox if (w.key or "").startswith("pos_n_")).set_value(i % 5)),
        ("model: distances 4096 <-> 8192", tabs[2],
         lambda i: at.selectbox(key="pos_max_distance").set_value([4096, 8192][i % 2])),
        ("model: layer slider", tabs[2], lambda i: at.slider(key="w_layer").set_value(i % 30)),
        ("model: hide sink toggle", tabs[2], lambda i: at.toggle(key="sink").set_value(i % 2 == 0)),
        ("switch tab", tabs[0], lambda i: at.session_state.__setitem__("pos_tab", tabs[i % 3])),
    ]
    return [(f"page rerun (AppTest): {name}", *change(tab, action), 0) for name, tab, action in cases]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-app", action="store_true", help="skip the whole-page AppTest reruns")
    args = ap.parse_args()
    lm = load_model()
    cfg = lm.config

    def clear():
        page.pe_view.clear()
        page.pe_offsets.clear()

    rows = []
    for d, n_pos, base in ((128, 256, 10_000.0), (512, 1024, 10_000.0), (1024, 2048, 10_000.0),
                           (16, 2048, 1_000_000.0), (1024, 16, 100.0)):
        dims = page.default_wave_dims(d)
        fn = lambda d=d, n_pos=n_pos, base=base, dims=dims: page.sinusoidal_figures(d, n_pos, base, dims)  # noqa
        for label, clr in (("cold", clear), ("warm", None)):
            t, c, size = timed(fn, args.runs, clr)
            rows.append((f"sinusoidal d={d} positions={n_pos} base={base:g} ({label})", t, c, size))

    for n_pos, pairs in ((64, (0, 16)), (512, (0, 31))):
        t, c, size = timed(lambda n_pos=n_pos, pairs=pairs: page.rope_theory_figures(
            cfg.head_dim, cfg.rope_theta, 1_000_000.0, pairs, n_pos, cfg.max_positions), args.runs)
        rows.append((f"RoPE theory: frequencies + 2 rotations ({n_pos} positions) + pairing", t, c, size))

    for text in ("The little robot looked at the stars every night, hoping that one day it could fly up.", LONG_TEXT):
        tr = lm.run(text)
        T = tr.n_tokens
        t, c, _ = timed(lambda tr=tr: {"_": lm.layer_detail(tr, 20)} and {}, args.runs)
        rows.append((f"layer_detail (T={T}; cached per (text, layer) in the app)", t, c, 0))
        detail = lm.layer_detail(tr, 20)
        m = T - 1
        for max_distance, hide in ((4096, False), (8192, True)):
            for label, cold in (("cold", True), ("warm", False)):
                # a cold run names a source never seen (the derived cache misses), a warm one the same each time
                fn = lambda detail=detail, tr=tr, md=max_distance, hide=hide, m=m, cold=cold: page.model_figures(  # noqa: E731
                    detail, ("bench", time.perf_counter_ns() if cold else 0), tr.tokens, 4, cfg.group_size,
                    cfg.head_dim, cfg.rope_theta, m, max(0, m - 3), md, hide, max_shift=cfg.max_positions - 1 - m)
                t, c, size = timed(fn, args.runs, None)
                rows.append((f"RoPE in the model T={T} distances<={max_distance} hide_sink={hide} ({label})",
                             t, c, size))

    if not args.no_app:
        rows += page_reruns(args.runs)
    width = max(len(r[0]) for r in rows)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
          f"(wall times stretch when other processes compete; CPU = this process only)")
    print(f"{'path':<{width}}  {'wall s':>7}  {'CPU s':>6}  {'JSON kB':>8}  budget {BUDGET_S} s (wall)")
    for name, t, c, size in rows:
        print(f"{name:<{width}}  {t:>7.3f}  {c:>6.3f}  {size / 1000:>8.0f}  {'ok' if t <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
