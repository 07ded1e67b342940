"""Server time of the Positional encodings page (budget: 0.5 s per control change).

First each view's work without the app, as its page does it: the maths (model.maths.positional / alibi, the
model's layer detail for "inside the model") and the figures (viz.positional / viz.efficient, then what
st.plotly_chart does with each: Plotly's figure check and JSON), nothing cached. Then whole-page reruns in
Streamlit's AppTest (router, shell and page, the app's own caches), one control changed per rerun: "cold" where each
run asks for a value not seen before, else cached after the first runs.
Median of --runs runs (default 7). Run (from the repository root): python -m bench.bench_positional [--no-app]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import plotly.io as pio  # noqa: E402
import plotly.tools  # noqa: E402
import streamlit.logger  # noqa: E402

import viz.efficient as VE  # noqa: E402
import viz.positional as VP  # noqa: E402
from app_core import schemas as S  # noqa: E402
from harness.apptest import open_page, rerun  # noqa: E402
from model import load_model  # noqa: E402
from model.analysis.head_stats import sink_hidden_view  # noqa: E402
from model.maths import alibi as A  # noqa: E402
from model.maths import positional as P  # noqa: E402
from viz.attention import causal_nan  # noqa: E402

BUDGET_S = 0.5
MAX_CELLS = 512                 # the page's heatmap thinning (cells per axis)
ROPE_BASES = (10_000.0, 100_000.0, 1_000_000.0)
KEY_PICK = "pos_key_pick"       # the page's key token box (its own widget key, not a link parameter)
LONG_TEXT = ("Rotary position embeddings rotate each pair of query and key dimensions by an angle that grows with "
             "the token's position. ") * 40


def ship(figures) -> int:
    """What st.plotly_chart does with each figure: check it, then serialise it to JSON. Returns bytes sent."""
    total = 0
    for fig in figures:
        fig = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
        total += len(pio.to_json(fig, validate=False))
    return total


def sinusoidal(d: int, n_pos: int, base: float):
    """The sinusoidal view's maths; returns its figures' builder."""
    dims = P.default_wave_dims(d)
    pe, positions, shown_dims, sim = P.pe_view(d, n_pos, base, MAX_CELLS)
    starts, offsets, dots = P.pe_offsets(d, n_pos, base)
    waves = P.sinusoidal_pe_dims(n_pos, d, base, dims)                                   # [len(dims), P]
    return lambda: [VP.pe_heatmap(pe, positions, shown_dims, base),
                    VP.pe_waves(np.arange(n_pos), waves, dims, d, base),
                    VP.pe_offset_dot_figure(offsets, dots, starts),
                    VP.pe_similarity_figure(sim, positions, size=500)]


def rope_theory(head_dim: int, model_base: float, pairs: tuple[int, int], n_pos: int, context: int):
    bases = sorted({*ROPE_BASES, model_base})
    freqs = {f"{b:,.0f}": P.rope_frequencies(head_dim, b) for b in bases}
    thetas = P.rope_frequencies(head_dim, model_base)
    paths = [P.rotation_path(thetas[i], n_pos) for i in pairs]
    return lambda: [VP.rope_frequency_figure(freqs, context, f"{model_base:,.0f}"),
                    *(VP.rotation_figure(path, i, thetas[i], height=420) for path, i in zip(paths, pairs, strict=True)),
                    VP.pairing_diagram(8)]


def rope_in_model(detail, tokens: list[str], head: int, kv: int, head_dim: int, base: float, m: int, n: int,
                  max_distance: int, hide_sink: bool, max_shift: int):
    """The "inside the model" view's maths for query head `head` (reading KV head kv) and the pair (m, n)."""
    q, k = detail.q[head, m], detail.k[kv, n]                        # [hd] pre-RoPE content
    q_rot, k_rot = detail.q_rot[head, m], detail.k_rot[kv, n]        # [hd] as the model rotated them
    thetas = P.rope_frequencies(head_dim, base)
    contrib_rot, contrib_plain = P.pair_contributions(q_rot, k_rot), P.pair_contributions(q, k)
    score = float(detail.scores[head, m, n])
    shifts, curves, distances, by_distance, envelope = P.rope_curves(q, k, m, n, base, max_distance, max_shift)
    without = P.attention_without_rope(detail.q[head], detail.k[kv], detail.mask)
    shown = [sink_hidden_view(p) if hide_sink else causal_nan(p) for p in (detail.pattern[head], without)]
    return lambda: [VP.rope_pairs_figure(P.split_pairs(q), P.split_pairs(q_rot), P.split_pairs(k),
                                         P.split_pairs(k_rot), np.arange(head_dim // 2), thetas, m, n),
                    VP.pair_contribution_figure(contrib_rot, contrib_plain, thetas, score, head_dim),
                    VP.shift_figure(shifts, curves),
                    VP.distance_figure(distances, by_distance, envelope, current=m - n),
                    VP.pattern_pair_figure(*shown, tokens, query=m)]


def alibi(n_heads: int, head: int, n_pos: int, max_distance: int, head_dim: int, model_base: float):
    slopes = A.alibi_slopes(n_heads)
    distances = np.arange(max_distance + 1)
    bias = A.alibi_bias(slopes, n_pos)[head]
    weights = A.alibi_weight_by_distance(slopes, distances)
    rope = {f"RoPE, base {b:,.0f}": A.rope_decay(head_dim, b, distances) for b in {model_base, 10_000.0}}
    names = [f"head {h}, m = {m:.4g}" for h, m in enumerate(slopes)]
    return lambda: [VE.slopes_figure(slopes, selected=head, title="slopes", x_title="head", y_title="m"),
                    VE.bias_heatmap(bias, title="bias", x_title="j", y_title="i", value_word="bias"),
                    VE.alibi_rope_figure(distances, weights, names, head, rope, titles=("ALiBi", "RoPE"),
                                         x_title="distance", y_titles=("weight", "score"))]


def timed(maths, runs: int) -> tuple[float, float, float, int]:
    """(median wall s of the maths, of the figures built and shipped, median CPU s of both, JSON bytes)."""
    maths_s, figures_s, cpu, size = [], [], [], 0
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        figures = maths()
        t1 = time.perf_counter()
        size = ship(figures())
        t2 = time.perf_counter()
        maths_s.append(t1 - t0)
        figures_s.append(t2 - t1)
        cpu.append(time.process_time() - c0)
    return statistics.median(maths_s), statistics.median(figures_s), statistics.median(cpu), size


def no_figures(_):
    """A figures' builder that builds none (a path of maths only)."""
    return lambda: []


def view_paths(lm, runs: int) -> list[tuple]:
    """Each view's maths and figures, without the app: (name, maths s, figures s, CPU s, bytes)."""
    cfg = lm.config
    rows = []
    for d, n_pos, base in ((128, 256, 10_000.0), (512, 1024, 10_000.0), (1024, 2048, 10_000.0),
                           (16, 2048, 1_000_000.0), (1024, 16, 100.0)):
        rows.append((f"sinusoidal d={d} positions={n_pos} base={base:g}",
                     *timed(lambda d=d, n_pos=n_pos, base=base: sinusoidal(d, n_pos, base), runs)))
    for n_pos, pairs in ((64, (0, 16)), (512, (0, 31))):
        rows.append((f"RoPE theory: frequencies + 2 rotations ({n_pos} positions) + pairing",
                     *timed(lambda n_pos=n_pos, pairs=pairs: rope_theory(
                         cfg.head_dim, cfg.rope_theta, pairs, n_pos, cfg.max_positions), runs)))
    layer, head = min(20, cfg.n_layers - 1), 4
    for text in ("The little robot looked at the stars every night, hoping that one day it could fly up.", LONG_TEXT):
        trace = lm.run(text)
        T = trace.n_tokens
        rows.append((f"layer_detail (T={T}; cached per (text, layer) in the app)",
                     *timed(lambda trace=trace: no_figures(lm.layer_detail(trace, layer)), runs)))
        detail, m = lm.layer_detail(trace, layer), T - 1
        for max_distance, hide in ((4096, False), (8192, True)):
            rows.append((f"RoPE in the model T={T} distances<={max_distance} hide_sink={hide}",
                         *timed(lambda detail=detail, trace=trace, md=max_distance, hide=hide, m=m: rope_in_model(
                             detail, trace.tokens, head, cfg.kv_head_of(head), cfg.head_dim, cfg.rope_theta, m,
                             max(0, m - 3), md, hide, cfg.max_positions - 1 - m), runs)))
    for heads, n_pos, max_distance in ((cfg.n_heads, 24, 512), (S.MAX_ALIBI_HEADS, 128, 8192)):
        rows.append((f"ALiBi heads={heads} positions={n_pos} distances<={max_distance}",
                     *timed(lambda h=heads, n=n_pos, md=max_distance: alibi(
                         h, 0, n, md, cfg.head_dim, cfg.rope_theta), runs)))
    return rows


def page_reruns(runs: int, n_layers: int) -> list[tuple[str, float, float]]:
    """Whole-page reruns in Streamlit's AppTest (router + shell + this page), one control changed per rerun:
    (name, median wall s, median CPU s)."""
    at = open_page("positional", view="sin")
    streamlit.logger.set_log_level("error")     # after the first run read the config: no "missing ScriptRunContext"

    def key(name: str) -> str:
        return S.POSITIONAL.by_name(name).key

    def change(view, action):
        at.session_state[key("view")] = view
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
         lambda i: at.select_slider(key=key("d")).set_value(S.D_MODEL_OPTIONS[-1 - i % 12])),
        ("positions (2048 - 16 i: cold cache)", "sin",
         lambda i: at.slider(key=key("positions")).set_value(S.MAX_PE_POSITIONS - 16 * i)),
        ("base 1e4 <-> 1e6", "sin",
         lambda i: at.select_slider(key=key("base")).set_value([10_000, 1_000_000][i % 2])),
        ("RoPE pair slider", "rope", lambda i: at.slider(key=key("pa")).set_value(i % 32)),
        ("RoPE positions 64 <-> 512", "rope", lambda i: at.slider(key=key("rpositions")).set_value([64, 512][i % 2])),
        ("model: key token n", "model", lambda i: at.selectbox(key=KEY_PICK).set_value(i % 5)),
        ("model: distances 4096 <-> 8192", "model",
         lambda i: at.selectbox(key=key("dist")).set_value([4096, 8192][i % 2])),
        ("model: layer slider (new layer each run)", "model",
         lambda i: at.slider(key=S.LAYER.key).set_value(i % n_layers)),
        ("model: hide sink toggle", "model", lambda i: at.toggle(key=S.SINK.key).set_value(i % 2 == 0)),
        ("ALiBi: head slider", "alibi", lambda i: at.slider(key=key("ahead")).set_value(i % 8)),
        ("ALiBi: distances 512 <-> 8192", "alibi",
         lambda i: at.selectbox(key=key("adist")).set_value([512, 8192][i % 2])),
        ("switch view", "sin", lambda i: at.session_state.__setitem__(key("view"), views[(i + 1) % len(views)])),
    ]
    return [(f"page rerun (AppTest): {name}", *change(view, action)) for name, view, action in cases]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-app", action="store_true", help="skip the whole-page AppTest reruns")
    args = ap.parse_args()
    lm = load_model()
    paths = view_paths(lm, args.runs)
    reruns = [] if args.no_app else page_reruns(args.runs, lm.config.n_layers)
    width = max(len(r[0]) for r in paths + reruns)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
          f"(wall times stretch when other processes compete; CPU = this process only)")
    print(f"{'view path (no cache)':<{width}}  {'maths s':>7}  {'figs s':>7}  {'CPU s':>6}  {'JSON kB':>8}  "
          f"budget {BUDGET_S} s (wall)")
    for name, maths_s, figures_s, c, size in paths:
        total = maths_s + figures_s
        print(f"{name:<{width}}  {maths_s:>7.3f}  {figures_s:>7.3f}  {c:>6.3f}  {size / 1000:>8.0f}  "
              f"{'ok' if total <= BUDGET_S else 'OVER'}")
    if reruns:
        print(f"{'page rerun':<{width}}  {'wall s':>7}  {'CPU s':>7}")
        for name, t, c in reruns:
            print(f"{name:<{width}}  {t:>7.3f}  {c:>7.3f}  {'ok' if t <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
