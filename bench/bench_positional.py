"""Server time of every figure-building path of the Positional encodings page (budget: 0.5 s per control change).

Each path = the page's builder (sinusoidal_figures, rope_theory_figures, model_figures, alibi_figures: arrays
through caches.cached, figures through SharedBuilders / shared_figure) + what st.plotly_chart does with each figure
(Plotly's figure check and JSON). "cold": the shared "derived" (arrays) and "figures" caches cleared before every
run; "warm": both cached. Then whole-page reruns in AppTest, one control changed per rerun.
Median of --runs runs (default 7). Run (from the repository root): python -m bench.bench_positional
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

warnings.filterwarnings("ignore")

import plotly.graph_objects as go  # noqa: E402
import plotly.io as pio  # noqa: E402
import plotly.tools  # noqa: E402
import streamlit.logger  # noqa: E402

from app_core import schemas as S  # noqa: E402
from app_pages import _caches as caches  # noqa: E402
from app_pages import positional as page  # noqa: E402
from model.lessons import positional as P  # noqa: E402
from tests.app.apptest import open_page, rerun  # noqa: E402

streamlit.logger.set_log_level("error")     # builders outside a script run: "missing ScriptRunContext" warnings

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


def clear() -> None:
    """Cold: the page's arrays and the shared figures forgotten."""
    caches.caches()["derived"].clear()
    caches.caches()["figures"].clear()


def timed(fn, runs: int, cold: bool) -> tuple[float, float, int]:
    """(median wall s, median CPU s of this process, JSON bytes); warm runs follow one untimed run that fills."""
    if not cold:
        fn()
    times, cpu, size = [], [], 0
    for _ in range(runs):
        if cold:
            clear()
        t0, c0 = time.perf_counter(), time.process_time()
        size = ship(fn())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu), size


def cold_warm(rows: list, name: str, fn, runs: int) -> None:
    for label, cold in (("cold", True), ("warm", False)):
        rows.append((f"{name} ({label})", *timed(fn, runs, cold)))


def page_reruns(runs: int, n_layers: int) -> list[tuple[str, float, float, int]]:
    """Whole-page reruns in Streamlit's AppTest (router + shell + this page), one control changed per rerun; the
    caches cleared first, so that the builders' runs above warm none of them."""
    clear()
    at = open_page("positional", view="sin")

    def change(view, action):
        at.session_state[page.VIEW.key] = view
        rerun(at)
        times, cpu = [], []
        for i in range(runs):
            action(i)
            t0, c0 = time.perf_counter(), time.process_time()
            rerun(at)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        return statistics.median(times), statistics.median(cpu)

    views = list(S.POSITIONAL_VIEWS)
    cases = [
        ("d_model (new value each run: cold cache)", "sin",
         lambda i: at.select_slider(key=page.PE_D.key).set_value(S.D_MODEL_OPTIONS[-1 - i % 12])),
        ("positions (2048 - 16 i: cold cache)", "sin",
         lambda i: at.slider(key=page.PE_N.key).set_value(S.MAX_PE_POSITIONS - 16 * i)),
        ("base 1e4 <-> 1e6", "sin",
         lambda i: at.select_slider(key=page.PE_BASE.key).set_value([10_000, 1_000_000][i % 2])),
        ("RoPE pair slider", "rope", lambda i: at.slider(key=page.PAIR_A.key).set_value(i % 32)),
        ("RoPE positions 64 <-> 512", "rope", lambda i: at.slider(key=page.ROT_N.key).set_value([64, 512][i % 2])),
        ("model: key token n", "model", lambda i: at.selectbox(key=page.KEY_PICK).set_value(i % 5)),
        ("model: distances 4096 <-> 8192", "model",
         lambda i: at.selectbox(key=page.DISTANCE.key).set_value([4096, 8192][i % 2])),
        ("model: layer slider (new layer each run)", "model",
         lambda i: at.slider(key=S.LAYER.key).set_value(i % n_layers)),
        ("model: hide sink toggle", "model", lambda i: at.toggle(key=S.SINK.key).set_value(i % 2 == 0)),
        ("ALiBi: head slider", "alibi", lambda i: at.slider(key=page.ALIBI_HEAD.key).set_value(i % 8)),
        ("ALiBi: distances 512 <-> 8192", "alibi",
         lambda i: at.selectbox(key=page.ALIBI_DIST.key).set_value([512, 8192][i % 2])),
        ("switch view", "sin", lambda i: at.session_state.__setitem__(page.VIEW.key, views[(i + 1) % len(views)])),
    ]
    return [(f"page rerun (AppTest): {name}", *change(view, action), 0) for name, view, action in cases]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-app", action="store_true", help="skip the whole-page AppTest reruns")
    args = ap.parse_args()
    lm = caches.load_shared_model()
    cfg = lm.config
    rows: list = []

    for d, n_pos, base in ((128, 256, 10_000.0), (512, 1024, 10_000.0), (1024, 2048, 10_000.0),
                           (16, 2048, 1_000_000.0), (1024, 16, 100.0)):
        dims = P.default_wave_dims(d)
        cold_warm(rows, f"sinusoidal d={d} positions={n_pos} base={base:g}",
                  lambda d=d, n_pos=n_pos, base=base, dims=dims: page.sinusoidal_figures(d, n_pos, base, dims),
                  args.runs)

    for n_pos, pairs in ((64, (0, 16)), (512, (0, 31))):
        cold_warm(rows, f"RoPE theory: frequencies + 2 rotations ({n_pos} positions) + pairing",
                  lambda n_pos=n_pos, pairs=pairs: page.rope_theory_figures(
                      cfg.head_dim, cfg.rope_theta, 1_000_000.0, pairs, n_pos, cfg.max_positions), args.runs)

    layer = min(20, cfg.n_layers - 1)
    for text in ("The little robot looked at the stars every night, hoping that one day it could fly up.", LONG_TEXT):
        tr = lm.run(text)
        T = tr.n_tokens
        t, c, _ = timed(lambda tr=tr: {"_": lm.layer_detail(tr, layer)} and {}, args.runs, cold=False)
        rows.append((f"layer_detail (T={T}; cached per (text, layer) in the app)", t, c, 0))
        detail = lm.layer_detail(tr, layer)
        m = T - 1
        for max_distance, hide in ((4096, False), (8192, True)):
            cold_warm(rows, f"RoPE in the model T={T} distances<={max_distance} hide_sink={hide}",
                      lambda detail=detail, tr=tr, md=max_distance, hide=hide, m=m: page.model_figures(
                          detail, ("bench", tr.text), tr.tokens, 4, cfg.group_size, cfg.head_dim, cfg.rope_theta, m,
                          max(0, m - 3), md, hide, max_shift=cfg.max_positions - 1 - m), args.runs)

    for heads, n_pos, max_distance in ((cfg.n_heads, 24, 512), (S.MAX_ALIBI_HEADS, 128, 8192)):
        cold_warm(rows, f"ALiBi heads={heads} positions={n_pos} distances<={max_distance}",
                  lambda h=heads, n=n_pos, md=max_distance: page.alibi_figures(
                      h, 0, n, md, cfg.head_dim, cfg.rope_theta), args.runs)

    if not args.no_app:
        rows += page_reruns(args.runs, cfg.n_layers)
    width = max(len(r[0]) for r in rows)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
          f"(wall times stretch when other processes compete; CPU = this process only)")
    print(f"{'path':<{width}}  {'wall s':>7}  {'CPU s':>6}  {'JSON kB':>8}  budget {BUDGET_S} s (wall)")
    for name, t, c, size in rows:
        print(f"{name:<{width}}  {t:>7.3f}  {c:>6.3f}  {size / 1000:>8.0f}  {'ok' if t <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
