"""Positional encodings page: sinusoidal PE waves, RoPE's rotations, and RoPE at work inside the real model.

Thin: the maths is in model/positional.py (the same functions the decoder calls), the figures in viz/positional.py.
Three lazy tabs: only the open one is computed. The `*_figures` builders are plain functions so that
bench/bench_positional.py can time exactly what a rerun does.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from app_pages import _state
from app_pages._widgets import plotly_config, token_label
from model import positional as P
from model.head_stats import apply_sink
from viz import positional as V
from viz.theme import token_tick_labels

K = "pos_"                                                   # prefix of every session-state key on this page
D_MODEL_OPTIONS = [16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
BASE_OPTIONS = [100, 1_000, 10_000, 100_000, 1_000_000]
MAX_POSITIONS = 2048
MAX_CELLS = 512            # per heatmap axis: more cells than screen pixels only cost transfer time
ROPE_BASES = {10_000.0: "RoPE paper, Llama 1/2", 100_000.0: "SmolLM2",
              1_000_000.0: "long context: Qwen3; Llama 3 uses 500,000"}
DISTANCE_OPTIONS = [512, 2048, 4096, 8192]
TABS = ["Sinusoidal PE", "RoPE: the rotation", "RoPE inside the model"]
SIMILARITY_PX = 500          # the PE·PE heatmap: square, fits the main column of a 1024 px screen (560-680 px)
SIMILARITY_CAPTION_PX = 280  # beside it from 1280 px (main column 820 px >= 500 + gap + 280), under it below


# ------------------------------------------------------------------------------------------------ cached arrays

@st.cache_data(max_entries=16, show_spinner=False)
def pe_view(d_model: int, n_positions: int, base: float):
    """What the two heatmaps show, thinned to <= MAX_CELLS per axis: (pe [R, C], positions [R], dims [C],
    similarity [R, R] of the shown positions over all d_model dims)."""
    positions = V.thin(n_positions, MAX_CELLS)
    dims = V.thin_pairs(d_model, MAX_CELLS)
    rows = P.sinusoidal_pe_at(positions, d_model, base)                               # [R, d]
    return rows[:, dims], positions, dims, P.pe_similarity(rows)


@st.cache_data(max_entries=16, show_spinner=False)
def pe_offsets(d_model: int, n_positions: int, base: float):
    """(starts, offsets, PE(p)·PE(p+k) [3, K]) for three start positions p."""
    starts = sorted({0, n_positions // 3, 2 * n_positions // 3})
    max_offset = max(1, n_positions - 1)
    return starts, np.arange(max_offset + 1), P.pe_offset_dots(d_model, base, starts, max_offset)


@st.cache_data(max_entries=32, show_spinner=False)
def rope_curves(q: np.ndarray, k: np.ndarray, m: int, n: int, base: float, max_distance: int, max_shift: int):
    """Scores of one real q/k content at moved positions: (shifts, {label: scores over shifts}, distances,
    scores over distance, aligned envelope). Shifted pairs keep m−n, and m−n+1, m−n+16 for contrast."""
    shifts = np.arange(0, max_shift + 1, max(1, max_shift // 400))
    distances = np.arange(max_distance + 1)
    gap = m - n
    gaps = list(dict.fromkeys((gap, gap + 1, gap + 16)))
    q_pos, k_pos = [], []                                      # all curves in one rope_scores_at call
    for g in gaps:
        q_pos.append(m + shifts if m - g >= 0 else g + shifts)
        k_pos.append(m - g + shifts if m - g >= 0 else shifts)
    q_pos.append(distances)                                    # distance curve: key at 0, query at Δ
    k_pos.append(np.zeros_like(distances))
    scores = np.split(P.rope_scores_at(q, k, np.concatenate(q_pos), np.concatenate(k_pos), base),
                      np.cumsum([len(p) for p in q_pos])[:-1])
    curves = {f"m−n = {g}" + (" (the real pair)" if g == gap else ""): y
              for g, y in zip(gaps, scores[:-1], strict=True)}
    return shifts, curves, distances, scores[-1], P.aligned_envelope(q, k, distances, base)


# ------------------------------------------------------------------------------------------------ figure builders

def default_wave_dims(d_model: int) -> list[int]:
    """Five even (sine) dimensions from fastest to slowest."""
    return sorted({0, 2 * (d_model // 16), 2 * (d_model // 8), 2 * (d_model // 4), d_model - 2})


def sinusoidal_figures(d_model: int, n_positions: int, base: float, dims: list[int]) -> dict:
    pe, positions, shown_dims, sim = pe_view(d_model, n_positions, base)
    starts, offsets, dots = pe_offsets(d_model, n_positions, base)
    wave_positions = np.arange(n_positions)
    waves = P.sinusoidal_pe_dims(n_positions, d_model, base, dims)                     # [len(dims), P]
    return {
        "heatmap": V.pe_heatmap(pe, positions, shown_dims, base),
        "waves": V.pe_waves(wave_positions, waves, dims, d_model, base) if dims else None,
        "offset_dots": V.pe_offset_dot_figure(offsets, dots, starts),
        "similarity": V.pe_similarity_figure(sim, positions, size=SIMILARITY_PX),
        "max_dev": float(np.abs(dots - dots[0]).max()),
        "stride": (int(positions[1] - positions[0]) if len(positions) > 1 else 1, len(shown_dims) < d_model),
    }


def rope_base_labels(model_base: float) -> dict[float, str]:
    """The bases to compare, the model's own included and marked: {base: legend label}."""
    bases = sorted({*ROPE_BASES, float(model_base)})
    return {b: f"{b:,.0f} ({'this model' if b == model_base else ROPE_BASES[b]})" for b in bases}


def rope_theory_figures(head_dim: int, model_base: float, base: float, pairs: tuple[int, int],
                        n_positions: int, context_length: int) -> dict:
    labels = rope_base_labels(model_base)
    freqs = {labels[b]: P.rope_frequencies(head_dim, b) for b in labels}
    highlight = labels[model_base]
    thetas = P.rope_frequencies(head_dim, base)
    return {
        "frequencies": V.rope_frequency_figure(freqs, context_length, highlight),
        "rotations": [V.rotation_figure(P.rotation_path(thetas[i], n_positions), i, thetas[i], height=420)
                      for i in pairs],
        "pairing": V.pairing_diagram(8),
    }


def model_figures(detail, tokens: list[str], head: int, group_size: int, head_dim: int, base: float,
                  m: int, n: int, max_distance: int, hide_sink: bool, max_shift: int) -> dict:
    """Every figure of the 'inside the model' tab for one layer detail, head and (query m, key n)."""
    kv = head // group_size
    q, k = detail.q[head, m], detail.k[kv, n]                        # [hd] pre-RoPE content
    q_rot, k_rot = detail.q_rot[head, m], detail.k_rot[kv, n]        # [hd] as the model rotated them
    thetas = P.rope_frequencies(head_dim, base)
    pair_ids = np.arange(head_dim // 2)
    contrib_rot = P.pair_contributions(q_rot, k_rot)
    contrib_plain = P.pair_contributions(q, k)
    score = float(detail.scores[head, m, n])

    gap = m - n
    shifts, shift_curves, distances, by_distance, envelope = rope_curves(q, k, m, n, base, max_distance, max_shift)
    deviations = {label: float(np.abs(y - y[0]).max()) for label, y in shift_curves.items()}

    with_rope = detail.pattern[head]
    without = P.attention_without_rope(detail.q[head], detail.k[kv], detail.mask)
    mask = detail.mask
    key_positions = np.arange(mask.shape[1])
    if hide_sink:
        with_rope, without = apply_sink(with_rope), apply_sink(without)
    labels = [token_label(tokens, i, max_chars=9) for i in range(len(tokens))]
    q_vals, q_text = token_tick_labels(labels, max_labels=40)
    k_vals, k_text = token_tick_labels(labels, max_labels=12)                 # two panels share the width
    return {
        "pairs": V.rope_pairs_figure(P.split_pairs(q), P.split_pairs(q_rot), P.split_pairs(k), P.split_pairs(k_rot),
                                     pair_ids, thetas, m, n),
        "contributions": V.pair_contribution_figure(contrib_rot, contrib_plain, thetas, score, head_dim),
        "sum": float(contrib_rot.sum()), "score": score,
        "shift": V.shift_figure(shifts, shift_curves), "deviations": deviations,
        "distance": V.distance_figure(distances, by_distance, envelope, current=gap),
        "patterns": V.pattern_pair_figure(with_rope, without, mask, key_positions, (q_vals, q_text),
                                          (k_vals, k_text), query=m),
    }


# ------------------------------------------------------------------------------------------------ page

def chart(fig, key: str, width: int | str = "stretch") -> None:
    st.plotly_chart(fig, width=width, key=key, config=plotly_config(key.removeprefix(K + "fig_")))


def sinusoidal_tab() -> None:
    st.markdown(
        "The original Transformer (*Attention Is All You Need*, 2017) **adds** a fixed vector to each token "
        "embedding. Pair $i$ of dimensions is a sine and a cosine of the position $p$ at angular speed "
        "$\\omega_i = \\text{base}^{-2i/d}$, from one radian per token (dimension 0) to almost standing still.")
    st.latex(r"PE(p, 2i) = \sin(p\,\omega_i), \quad PE(p, 2i{+}1) = \cos(p\,\omega_i), "
             r"\quad \omega_i = \text{base}^{-2i/d}, \quad \lambda_i = 2\pi\,\text{base}^{2i/d}")
    c1, c2, c3 = st.columns(3)
    d_model = c1.select_slider("d_model (dimensions)", D_MODEL_OPTIONS, value=128, key=K + "d_model")
    n_positions = c2.slider("positions", 16, MAX_POSITIONS, 256, step=16, key=K + "n_positions")
    base = c3.select_slider("base", BASE_OPTIONS, value=10_000, key=K + "base", format_func=lambda b: f"{b:,}")
    dims = st.multiselect(
        "dimensions to draw as waves", list(range(d_model)), default=default_wave_dims(d_model),
        max_selections=8, key=f"{K}wave_dims_{d_model}",
        help="Even dimensions are sines, odd ones cosines. The wavelength λ is written beside each curve.")
    figs = sinusoidal_figures(d_model, n_positions, float(base), sorted(dims))
    chart(figs["heatmap"], K + "fig_heatmap")
    stride, thinned_dims = figs["stride"]
    if stride > 1 or thinned_dims:
        nth = {1: "all positions", 2: "every 2nd position", 3: "every 3rd position"}.get(
            stride, f"every {stride}th position")
        st.caption(f"Drawn: {nth}" + (", every other sin/cos pair" if thinned_dims else "")
                   + " (a screen has fewer pixels than cells). Fast dimensions alias when thinned: "
                     "the waves below are exact.")
    st.caption("Left columns change every token, right columns hardly at all: each position gets a unique "
               "pattern, like the digits of a clock with hands at many speeds.")
    if figs["waves"] is not None:
        chart(figs["waves"], K + "fig_waves")
    st.subheader("Relative position is built in")
    st.markdown(
        "For one pair, $\\sin(p\\omega)\\sin((p{+}k)\\omega) + \\cos(p\\omega)\\cos((p{+}k)\\omega) = "
        "\\cos(k\\omega)$, so $PE(p)\\cdot PE(p{+}k) = \\sum_i \\cos(k\\,\\omega_i)$: **only the offset $k$ "
        "matters**, not where you start.")
    chart(figs["offset_dots"], K + "fig_offset")
    st.caption(f"The curves for different start positions p lie on top of each other: largest difference "
               f"{figs['max_dev']:.1e} (float64 rounding).")
    # a square figure at its own size; the caption goes beside it when the page is wide enough, else below
    with st.container(horizontal=True, gap="small", vertical_alignment="center", key=K + "similarity_row"):
        chart(figs["similarity"], K + "fig_similarity", width=SIMILARITY_PX)
        with st.container(width=SIMILARITY_CAPTION_PX):
            st.caption("Constant along every diagonal (a Toeplitz matrix): the similarity of two positions is a "
                       "function of p − q only. The dark red diagonal is each position with itself (|PE(p)|² = "
                       "d_model / 2); away from it the dot product drops, so nearby positions look alike.")
    st.info(
        "**Learned absolute positions (GPT-2).** GPT-2 has no formula: its position table `wpe` is a learned "
        "1024 × 768 matrix, one row per position, trained like the word embeddings. Position 1,024 has no row at "
        "all, so the model cannot even be run past its trained length, and rows near the end saw the fewest "
        "training examples. Nothing ties row p to row p+k, so 'three tokens apart' must be learned separately at "
        "every position. The sine waves above can be evaluated at any p, but a model trained up to length L has "
        "never seen the combinations of phases beyond L, so it extrapolates poorly too (Press et al., ALiBi, "
        "2021). RoPE, next, puts position into the attention score itself, where only the distance survives.",
        icon=":material/straighten:")


def rope_theory_tab(cfg) -> None:
    st.markdown(
        "RoPE (Su et al., *RoFormer*, 2021) does not add anything to the embedding. Inside every attention "
        "layer it **rotates** each 2-D pair of a query and a key by an angle proportional to the token's "
        "position $m$. Pair $i$ turns at speed $\\theta_i$:")
    st.latex(r"\theta_i = \text{base}^{-2i/d}, \qquad \begin{pmatrix} x'_{a} \\ x'_{b} \end{pmatrix} = "
             r"\begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}"
             r"\begin{pmatrix} x_{a} \\ x_{b} \end{pmatrix}")
    st.markdown("Rotations add their angles and $R_m^\\top = R_{-m}$, so in the dot product of a query at "
                "$m$ with a key at $n$ only the distance is left:")
    st.latex(r"\langle R_m q,\; R_n k \rangle = \langle q,\; R_{n-m}\, k \rangle")
    half = cfg.head_dim // 2
    top = st.container()
    st.subheader("Watch one vector rotate")
    c1, c2, c3, c4 = st.columns([1.4, 1, 1, 1])
    bases = list(rope_base_labels(cfg.rope_theta))
    base = c1.selectbox("base", bases, index=bases.index(cfg.rope_theta), key=K + "rot_base",
                        format_func=lambda b: f"{b:,.0f}" + (" (this model)" if b == cfg.rope_theta else ""))
    n_positions = c2.slider("positions 0 … n−1", 2, 512, 64, key=K + "rot_positions")
    pair_a = c3.slider("left: pair i", 0, half - 1, 0, key=K + "rot_pair_a")
    pair_b = c4.slider("right: pair i", 0, half - 1, half // 2, key=K + "rot_pair_b")
    figs = rope_theory_figures(cfg.head_dim, cfg.rope_theta, base, (pair_a, pair_b),
                               n_positions, cfg.max_positions)
    with top:
        chart(figs["frequencies"], K + "fig_freqs")
        lam = P.wavelengths(P.rope_frequencies(cfg.head_dim, cfg.rope_theta))
        st.caption(f"head_dim = {cfg.head_dim}: {half} pairs. With this model's base {cfg.rope_theta:,.0f}, pair 0 "
                   f"turns once every {lam[0]:.1f} tokens and pair {half - 1} once every {lam[-1]:,.0f} tokens, "
                   f"beyond its {cfg.max_positions:,}-token context: the slowest pairs never complete a turn. A "
                   f"larger base stretches all wavelengths, which is how long-context models keep far positions "
                   f"apart.")
    a, b = st.columns(2)
    with a:
        chart(figs["rotations"][0], K + "fig_rot_a")
    with b:
        chart(figs["rotations"][1], K + "fig_rot_b")
    st.caption("The vector (1, 0) placed at positions 0, 1, …, n−1 (pale arrow: position 0, red arrow: the last "
               "position). Fast pairs spin round many times and tell "
               "neighbours apart; slow pairs barely move and still differ for tokens thousands apart.")

    st.subheader("Which dimensions form a pair? Two conventions")
    chart(figs["pairing"], K + "fig_pairing")
    st.markdown(
        f"The maths is identical; only the storage order differs. The RoPE paper rotates **adjacent** dimensions "
        f"(2i, 2i+1); Hugging Face's `rotate_half` rotates dimension i with **i + d/2**. "
        f"**This model uses half-split pairs (i, i+{half})**, and here is why: SmolLM2 was trained in the "
        f"Hugging Face layout. llama.cpp's converter permuted the rows of the Q and K weight matrices so that its "
        f"interleaved (adjacent-pair) RoPE gives the same result, and stored the GGUF file that way. When this "
        f"app loads the file it un-permutes those rows back "
        f"(`W.reshape(n_heads, {half}, 2, d_in).swapaxes(1, 2)`), so the decoder rotates half-split pairs "
        f"with `model/positional.py`'s `apply_rope(..., convention=\"half\")`. Mixing the two is wrong but looks "
        f"fine on one token (position 0 is not rotated): the unit tests check it on long inputs.")


def model_tab(cfg) -> None:
    trace = _state.current_trace()
    if trace is None:
        st.stop()
    _state.layer_head_controls()
    st.markdown("Pick the **query token m** (shared with the other pages) and a **key token n**: below are their "
                "real query and key vectors from this run, before and after RoPE.")
    _state.query_token_strip(trace, label="Query token m (click a token)")
    sel = _state.selection(trace)
    layer, head, m = sel.layer, sel.head, sel.query
    detail = _state.get_layer_detail(_state.current_text(), _state.DEFAULT_MAX_TOKENS, layer)
    c1, c2 = st.columns([3, 1])
    n = c1.selectbox(
        "Key token n (n ≤ m)", range(m + 1), index=_strongest_key(detail.pattern[head, m], m),
        format_func=lambda i: token_label(trace.tokens, i, 24), key=f"{K}n_{layer}_{head}_{m}",
        help="Default: the key this head attends to most from m, apart from token 0 (the attention sink).")
    max_distance = c2.selectbox("Distances up to", DISTANCE_OPTIONS, index=2, key=K + "max_distance",
                                format_func=lambda d: f"{d:,} tokens")
    st.caption(f"Layer {layer}, head {head} (reads KV head {head // cfg.group_size}) · query m = "
               f"{token_label(trace.tokens, m)} · key n = {token_label(trace.tokens, n)} · distance m − n = {m - n}. "
               f"Layer and head: sidebar.")
    figs = model_figures(detail, trace.tokens, head, cfg.group_size, cfg.head_dim, cfg.rope_theta, m, n,
                         max_distance, sel.hide_sink, max_shift=cfg.max_positions - 1 - m)

    st.subheader(f"The {cfg.head_dim // 2} pairs of q (token {m}) and k (token {n})")
    chart(figs["pairs"], K + "fig_pairs")
    st.caption("Each circle is one pair i (its wavelength λ in tokens above it), scaled to its longest arrow. Pale "
               "dashed: the vectors the projection produced; solid: after RoPE turned q by m·θᵢ and k by n·θᵢ. "
               "Only the angle between q and k after rotation, (m−n)·θᵢ plus their original angle, counts.")
    chart(figs["contributions"], K + "fig_contrib")
    st.caption(f"q_rot · k_rot = Σ pairs = {figs['sum']:.5f}; the model's score × √{cfg.head_dim} = "
               f"{figs['score'] * np.sqrt(cfg.head_dim):.5f} (difference "
               f"{abs(figs['sum'] - figs['score'] * np.sqrt(cfg.head_dim)):.1e}, float32 rounding). Outlined bars: "
               f"the same q and k without rotation.")

    st.subheader("Only the distance m − n matters: proven on these real vectors")
    chart(figs["shift"], K + "fig_shift")
    dev = "; ".join(f"{label}: max deviation {d:.1e}" for label, d in figs["deviations"].items())
    st.caption(f"Same q and k content placed at (m+s, n+s) for shifts s up to {cfg.max_positions - 1 - m:,} "
               f"(the context limit). Each line is flat up to float32 rounding — {dev}. Changing the distance "
               f"changes the score.")

    st.subheader("As the distance grows")
    chart(figs["distance"], K + "fig_distance")
    st.caption("This q/k pair's score with the key at 0 and the query Δ tokens later. Fast pairs average out "
               "quickly and the slow ones drift: the score oscillates and its swings shrink. Dotted: the same "
               "lengths with every pair starting aligned — the long-range decay from the RoPE paper.")

    st.subheader("With and without RoPE")
    st.button("Open the strongest previous-token head", key=K + "prev_head", on_click=_open_prev_token_head,
              help="Picks the layer and head that put the most attention on the token just before (on this text). "
                   "Its diagonal is made by RoPE: watch it vanish on the right.")
    chart(figs["patterns"], K + "fig_patterns")
    st.caption("Left: the model's own pattern. Right: the same q and k, softmax of masked q·k/√d with the rotation "
               "switched off. Without the rotation the score sees only what q and k contain, not how far apart "
               "they are: heads that rely on distance (previous-token, local) change the most. Grey: future keys "
               "(causal mask)."
               + (" Token 0 hidden, rows renormalised." if sel.hide_sink else ""))


def _open_prev_token_head() -> None:
    """Button callback: select the head with the highest previous-token score on the current text."""
    stats = _state.get_head_stats(_state.current_text(), _state.DEFAULT_MAX_TOKENS, False)["prev_token"]  # [L, H]
    layer, head = np.unravel_index(int(np.nanargmax(stats)), stats.shape)
    _state.set_layer_head(int(layer), int(head))


def _strongest_key(row: np.ndarray, m: int) -> int:
    """The key the head attends to most from query m, leaving out token 0 when there is another choice."""
    if m == 0:
        return 0
    return 1 + int(np.argmax(row[1:m + 1]))


def render() -> None:
    st.title("Positional encodings")
    st.markdown("Attention by itself is order-blind: shuffle the tokens and each gets the same output. Two ways to "
                "tell it where each token is: **add** sine waves to the input (2017), or **rotate** queries and "
                "keys inside attention (RoPE, 2021; this model and most current LLMs).")
    cfg = _state.get_model().config
    tabs = st.tabs(TABS, key=K + "tab", on_change="rerun")
    if tabs[0].open:
        with tabs[0]:
            sinusoidal_tab()
    if tabs[1].open:
        with tabs[1]:
            rope_theory_tab(cfg)
    if tabs[2].open:
        with tabs[2]:
            model_tab(cfg)


if __name__ == "__main__":
    render()
