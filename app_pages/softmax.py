"""Softmax & temperature: one distribution from the real run (a head's attention scores for the selected query, or
the next-token logits), reshaped by a log-scale temperature, filtered by top-k / top-p, and sampled with a seed."""
from __future__ import annotations

import numpy as np
import streamlit as st

from app_pages import _state as state
from app_pages._widgets import escape_markdown, show_figure, token_label
from model.sampling import (
    T_MAX,
    T_MIN,
    effective_choices,
    entropy_bits,
    filter_probs,
    nearest_temperature,
    sample,
    softmax,
    temperature_grid,
    temperature_sweep,
)
from viz.softmax import probability_bars, sample_histogram, temperature_curves

K = "softmax_"                                   # prefix of this page's widget keys
SOURCES = ("next", "attention")
SOURCE_LABELS = {"next": "Next-token logits", "attention": "Attention scores of one head"}
TOP_ROWS = 20                                    # bars shown
SWEEP = np.geomspace(T_MIN, T_MAX, 97)           # temperatures of the curves
GRID = temperature_grid(T_MIN, T_MAX)            # slider stops, log-spaced
MAX_SAMPLES = 100_000
SHOWN_DRAWS = 16


def _temperature_options_and_value() -> tuple[list[float], float]:
    """Slider stops and the current temperature (from the shared state / URL param `temp`)."""
    shared = float(st.session_state.get(state.K_TEMP, 1.0))
    value = shared if T_MIN <= shared <= T_MAX else nearest_temperature(GRID, shared)
    options = GRID if value in GRID else sorted({*GRID, value})   # keep an exact value from a link
    return options, value


def _on_temperature() -> None:
    st.session_state[state.K_TEMP] = st.session_state[K + "temp"]


def _clamped_number(key: str, lo: int, hi: int, default: int) -> None:
    """Keep a number widget's stored value inside a range that depends on the data (before it is drawn)."""
    value = st.session_state.get(key, default)
    st.session_state[key] = int(max(lo, min(hi, value if value is not None else default)))


st.title("Softmax & temperature")
trace = state.current_trace()
if trace is None:
    st.stop()
lm = state.get_model()
st.markdown("Softmax turns scores (logits) into probabilities. Dividing the logits by a **temperature T** first "
            "reshapes the distribution without changing the order: T < 1 sharpens it toward the top choice, "
            "T > 1 flattens it toward uniform.")
st.latex(r"p_i = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}}")

c_src, c_temp = st.columns([2, 3])
with c_src:
    source = st.radio("Distribution", SOURCES, format_func=SOURCE_LABELS.get, key=K + "source", horizontal=True,
                      help="Next-token logits: the model's scores for every token of its vocabulary after your "
                           "text. Attention scores: one head's q·k/√d for the selected query token (keys j ≤ i).")
with c_temp:
    options, temperature = _temperature_options_and_value()
    st.session_state[K + "temp"] = temperature
    st.select_slider("Temperature T (log scale)", options=options, key=K + "temp", on_change=_on_temperature,
                     format_func=lambda t: f"{t:g}",
                     help=f"From {T_MIN:g} (almost always the top choice) to {T_MAX:g} (almost uniform). Stops are "
                          "evenly spaced on a log scale; 1 is the model's own distribution.")

if source == "attention":
    state.layer_head_controls()
    sel = state.selection(trace)
    query = state.query_token_strip(trace)
    sel = state.selection(trace)
    detail = state.get_layer_detail(trace.text, state.DEFAULT_MAX_TOKENS, sel.layer)
    logits = np.asarray(detail.scores[sel.head, sel.query, : sel.query + 1], dtype=np.float64)   # keys j <= query
    labels_all = [token_label(trace.tokens, j) for j in range(sel.query + 1)]
    sink_hidden = sel.hide_sink and sel.query >= 1
    if sink_hidden:
        logits[0] = -np.inf                                   # hidden: the softmax renormalizes over j = 1..query
    query_name = escape_markdown(token_label(trace.tokens, sel.query))
    what = (f"Layer {sel.layer}, head {sel.head}: scores of query {query_name}"
            f" over its {sel.query + 1} allowed key{'s' if sel.query else ''} (future keys are masked).")
    if sink_hidden:
        what += " Key 0 (the attention sink) is hidden, so the softmax runs over keys 1 … i."
    if sel.query == 0:
        what += " The first token can only attend to itself: pick a later query token."
    st.caption(what + " At T = 1 this is exactly the head's attention row.")
else:
    logits = np.asarray(trace.next_token_logits, dtype=np.float64)
    labels_all = None
    st.caption(f"The model's {len(logits):,} next-token logits after your text (last token: "
               f"{escape_markdown(token_label(trace.tokens, trace.n_tokens - 1))}). Sampling from them is how the "
               "model writes.")

probs = softmax(logits, temperature)
n_candidates = int((probs > 0).sum()) if source == "attention" else len(probs)
order = np.argsort(-probs, kind="stable")
rows = order[: min(TOP_ROWS, n_candidates)]


def labels_for(ids) -> list[str]:
    ids = [int(i) for i in ids]
    return [labels_all[i] for i in ids] if labels_all is not None else lm.token_strings(ids)


st.subheader("Top-k and top-p: which candidates may be sampled")
c_k, c_p = st.columns(2)
with c_k:
    _clamped_number(K + "top_k", 0, n_candidates, 0)
    top_k = st.number_input("top-k (0 = off)", min_value=0, max_value=n_candidates, step=1, key=K + "top_k",
                            help=f"Keep only the k most probable of the {n_candidates:,} candidates.")
with c_p:
    st.session_state.setdefault(K + "top_p", 1.0)
    top_p = st.slider("top-p (1.00 = off)", 0.01, 1.0, step=0.01, key=K + "top_p", format="%.2f",
                      help="Nucleus sampling: keep the smallest set of most probable candidates whose total "
                           "probability reaches p (after top-k).")
keep, kept = filter_probs(probs, top_k=top_k or None, top_p=top_p)
H = entropy_bits(probs)

m1, m2, m3, m4 = st.columns(4)
m1.metric("Entropy", f"{H:.2f} bits", help="−Σ p log₂ p: 0 when one choice is certain, log₂ n for n equal choices")
m2.metric("Effective choices", f"{effective_choices(probs):,.1f}", help="2^entropy: as uncertain as this many "
          "equally likely options")
m3.metric("Top-1 probability", f"{probs.max():.1%}")
m4.metric("Kept candidates", f"{int(keep.sum()):,}", help="Candidates that top-k / top-p leave for sampling, and "
          "their share of the probability mass", delta=f"{probs[keep].sum():.1%} mass", delta_color="off")

shown_labels = labels_for(rows)
bars_title = (f"Top {len(rows)} of {n_candidates:,} at T = {temperature:g}" if n_candidates > len(rows)
              else f"All {n_candidates} keys at T = {temperature:g}")
show_figure(probability_bars(shown_labels, probs[rows], keep=keep[rows], renormalized=kept[rows], title=bars_title),
            key=K + "bars", filename="softmax_probabilities")
rest = float(probs[order[len(rows):]].sum()) if n_candidates > len(rows) else 0.0
st.caption("Blue: kept; grey: dropped by top-k / top-p. The red ticks show the kept candidates' probabilities after "
           "renormalizing (what sampling uses)."
           + (f" The {n_candidates - len(rows):,} candidates not shown hold {rest:.2%} together." if rest else ""))

st.subheader("What temperature does to the whole distribution")
sweep = temperature_sweep(logits, SWEEP)
show_figure(temperature_curves(sweep["temperature"], sweep["entropy_bits"], sweep["top1"], sweep["effective"],
                               current=temperature, current_values=(H, float(probs.max()),
                                                                    float(effective_choices(probs)))),
            key=K + "curves", filename="softmax_temperature_curves")
st.caption(f"Red: the current T = {temperature:g}. As T → 0 the distribution becomes greedy (all mass on the top "
           f"choice, entropy 0); as T grows it approaches uniform over the {n_candidates:,} candidates "
           f"(entropy log₂ {n_candidates:,} = {np.log2(n_candidates):.2f} bits).")

st.subheader("Sampling: draw N times with a fixed seed")
c_seed, c_n = st.columns(2)
with c_seed:
    st.session_state.setdefault(K + "seed", 0)
    seed = st.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key=K + "seed",
                           help="Same seed, same draws: change it to see another random run.")
with c_n:
    _clamped_number(K + "n_samples", 1, MAX_SAMPLES, 1000)
    n_samples = st.number_input("Number of draws N", min_value=1, max_value=MAX_SAMPLES, step=100,
                                key=K + "n_samples", help="More draws: the histogram gets closer to the probabilities.")
draws = sample(kept, int(n_samples), int(seed))
counts = np.bincount(draws, minlength=len(kept))
kept_order = order[keep[order]]
hist_rows = kept_order[:TOP_ROWS]
hist_labels = labels_for(hist_rows)
expected = kept[hist_rows]
observed = counts[hist_rows] / n_samples
if len(kept_order) > len(hist_rows):
    hist_labels.append(f"({len(kept_order) - len(hist_rows):,} other kept)")
    expected = np.append(expected, kept[kept_order[len(hist_rows):]].sum())
    observed = np.append(observed, counts[kept_order[len(hist_rows):]].sum() / n_samples)
show_figure(sample_histogram(hist_labels, expected, observed, int(n_samples),
                             title=f"{int(n_samples):,} draws from the kept distribution (seed {int(seed)})"),
            key=K + "histogram", filename="softmax_samples")
tv = 0.5 * float(np.abs(counts / n_samples - kept).sum())
first = " · ".join(escape_markdown(s) for s in labels_for(draws[:SHOWN_DRAWS]))
st.caption(f"First draws: {first}{' …' if len(draws) > SHOWN_DRAWS else ''}  \n"
           f"Blue: the renormalized kept probabilities; orange: the share of draws. They differ by "
           f"{tv:.1%} in total (half the summed absolute difference); with more draws the gap shrinks roughly as "
           "1/√N.")
