"""Positional encodings page: sinusoidal PE waves, RoPE's rotations, and RoPE at work inside the real model.

Thin: the maths is in model/positional.py (the same functions the decoder calls), the figures in viz/positional.py.
Three views; only the open one is computed. The `*_figures` builders compose arrays into figures and are plain
functions, so bench/bench_positional.py times exactly what a rerun does.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.efficient
import viz.positional
from app_core import schemas as S
from app_core.derived import pure
from app_core.derived.heads import head_statistics
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import N_, _, translated
from app_pages.frame.widgets import SharedBuilders, show_figure, token_label, token_legend
from model.analysis.head_stats import sink_hidden_view
from model.maths import alibi as A
from model.maths import positional as P
from viz.attention import causal_nan

VE = SharedBuilders(viz.efficient)
V = SharedBuilders(viz.positional)

VIEW = S.POSITIONAL.by_name("view")
PE_D, PE_N, PE_BASE, PE_DIMS = (S.POSITIONAL.by_name(n) for n in ("d", "positions", "base", "dims"))
ROT_BASE, ROT_N, PAIR_A, PAIR_B = (S.POSITIONAL.by_name(n) for n in ("rbase", "rpositions", "pa", "pb"))
KEY, DISTANCE = S.POSITIONAL.by_name("k"), S.POSITIONAL.by_name("dist")
ALIBI_HEADS, ALIBI_HEAD, ALIBI_N, ALIBI_DIST = (S.POSITIONAL.by_name(n) for n in ("aheads", "ahead", "apositions",
                                                                                     "adist"))
MAX_CELLS = 512            # per heatmap axis: more cells than screen pixels only cost transfer time
ROPE_BASES = {10_000.0: N_("RoPE paper, Llama 1/2"), 100_000.0: "SmolLM2",
              1_000_000.0: N_("long context: Qwen3; Llama 3 uses 500,000")}
SIMILARITY_PX = 500          # the PE·PE heatmap: square, fits the main column of a 1024 px screen
SIMILARITY_CAPTION_PX = 280  # beside it from 1280 px, under it below
DIMS_PICK = "pos_dims_pick"  # the multiselect's own key; it copies into the dims setting (None = automatic)
KEY_PICK = "pos_key_pick"    # the key token box's own key; it copies into the key setting (None = the strongest)
ROPE_PAPER_BASE = 10_000.0   # the base the RoPE tab draws for a model without RoPE


# ------------------------------------------------------------------------------------------------ figure builders

def sinusoidal_figures(d_model: int, n_positions: int, base: float, dims: list[int], words=V.WORDS) -> dict:
    key = (d_model, n_positions, base)
    ws = session.workspace()
    pe, positions, shown_dims, sim = ws.compute(pure, P.pe_view, *key, MAX_CELLS)
    starts, offsets, dots = ws.compute(pure, P.pe_offsets, *key)
    waves = P.sinusoidal_pe_dims(n_positions, d_model, base, dims)                     # [len(dims), P]
    return {
        "heatmap": V.pe_heatmap(pe, positions, shown_dims, base, words=words),
        "waves": V.pe_waves(np.arange(n_positions), waves, dims, d_model, base, words=words) if dims else None,
        "offset_dots": V.pe_offset_dot_figure(offsets, dots, starts, words=words),
        "similarity": V.pe_similarity_figure(sim, positions, size=SIMILARITY_PX, words=words),
        "max_dev": float(np.abs(dots - dots[0]).max()),
        "stride": (int(positions[1] - positions[0]) if len(positions) > 1 else 1, len(shown_dims) < d_model),
    }


def rope_base_labels(model_base: float, own: bool = True) -> dict[float, str]:
    """The bases to compare, the model's own included and marked (own: it is the model's base, not a stand-in for a
    model without RoPE): {base: legend label}."""
    bases = sorted({*ROPE_BASES, float(model_base)})
    return {b: f"{b:,.0f} (" + (_("this model") if b == model_base and own else _(ROPE_BASES[b])) + ")"
            for b in bases}


def rope_theory_figures(head_dim: int, model_base: float, base: float, pairs: tuple[int, int],
                        n_positions: int, context_length: int, words=V.WORDS, own: bool = True) -> dict:
    labels = rope_base_labels(model_base, own)
    freqs = {labels[b]: P.rope_frequencies(head_dim, b) for b in labels}
    thetas = P.rope_frequencies(head_dim, base)
    return {
        "frequencies": V.rope_frequency_figure(freqs, context_length, labels[model_base], words=words),
        "rotations": [V.rotation_figure(P.rotation_path(thetas[i], n_positions), i, thetas[i], height=420,
                                        words=words) for i in pairs],
        "pairing": V.pairing_diagram(8, words=words),
    }


def model_figures(detail, tokens: list[str], head: int, kv: int, head_dim: int, base: float, m: int, n: int,
                  max_distance: int, hide_sink: bool, max_shift: int, words=V.WORDS) -> dict:
    """Every figure of the 'inside the model' view for one layer detail, query head and its KV head, and (query m,
    key n)."""
    q, k = detail.q[head, m], detail.k[kv, n]                        # [hd] pre-RoPE content
    q_rot, k_rot = detail.q_rot[head, m], detail.k_rot[kv, n]        # [hd] as the model rotated them
    thetas = P.rope_frequencies(head_dim, base)
    contrib_rot = P.pair_contributions(q_rot, k_rot)
    contrib_plain = P.pair_contributions(q, k)
    score = float(detail.scores[head, m, n])
    shifts, shift_curves, distances, by_distance, envelope = session.workspace().compute(
        pure, P.rope_curves, q, k, m, n, base, max_distance, max_shift)
    with_rope = detail.pattern[head]
    without = P.attention_without_rope(detail.q[head], detail.k[kv], detail.mask)
    shown = [sink_hidden_view(p) if hide_sink else causal_nan(p) for p in (with_rope, without)]
    real = _("(the real pair)")
    shift_curves = {label.replace("(the real pair)", real): y for label, y in shift_curves.items()}
    return {
        "pairs": V.rope_pairs_figure(P.split_pairs(q), P.split_pairs(q_rot), P.split_pairs(k), P.split_pairs(k_rot),
                                     np.arange(head_dim // 2), thetas, m, n, words=words),
        "contributions": V.pair_contribution_figure(contrib_rot, contrib_plain, thetas, score, head_dim,
                                                    words=words),
        "sum": float(contrib_rot.sum()), "score": score,
        "shift": V.shift_figure(shifts, shift_curves, words=words),
        "deviations": {label: float(np.abs(y - y[0]).max()) for label, y in shift_curves.items()},
        "distance": V.distance_figure(distances, by_distance, envelope, current=m - n, words=words),
        "patterns": V.pattern_pair_figure(*shown, tokens, query=m, words=words),
    }


# ------------------------------------------------------------------------------------------------ views

def chart(fig, key: str, **kwargs) -> None:
    show_figure(fig, key=key, filename=key.removeprefix("pos_fig_"), **kwargs)


def _dims_picked() -> None:
    ss = st.session_state
    picked = sorted(ss.get(DIMS_PICK) or [])
    ss[PE_DIMS.key] = None if picked == P.default_wave_dims(int(ss[PE_D.key])) else picked


def sinusoidal_view() -> None:
    ss = st.session_state
    st.caption(_("The original Transformer (2017) **adds** a fixed vector to each token embedding: pair {i} of "
                 "dimensions is a sine and a cosine of the position {p} at angular speed {omega}, from one radian "
                 "per token (dimension 0) to almost standing still.").format(
        i="$i$", p="$p$", omega="$\\omega_i = \\text{base}^{-2i/d}$"))
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.select_slider(_("d_model (dimensions)"), S.D_MODEL_OPTIONS, key=PE_D.key, width=220, **controls.PERSIST,
                         on_change=controls.reset, args=(PE_DIMS.key,))
        st.slider(_("positions"), 16, S.MAX_PE_POSITIONS, step=16, key=PE_N.key, width=220, **controls.PERSIST)
        st.select_slider(_("base"), S.PE_BASE_OPTIONS, key=PE_BASE.key, width=180, format_func=lambda b: f"{b:,}",
                         **controls.PERSIST)
    d_model, n_positions, base = int(ss[PE_D.key]), int(ss[PE_N.key]), float(ss[PE_BASE.key])
    picked = ss.get(PE_DIMS.key)                                   # None: automatic; [] : no waves at all
    dims = [d for d in (P.default_wave_dims(d_model) if picked is None else picked) if d < d_model]
    figs = sinusoidal_figures(d_model, n_positions, base, dims, translated(V.WORDS))
    chart(figs["heatmap"], "pos_fig_heatmap")
    stride, thinned_dims = figs["stride"]
    if stride > 1 or thinned_dims:
        st.caption((_("Drawn: every {n}th position, every other sin/cos pair (a screen has fewer pixels than "
                       "cells). Fast dimensions alias when thinned: the waves below are exact.") if thinned_dims else
                     _("Drawn: every {n}th position (a screen has fewer pixels than cells). Fast dimensions alias "
                       "when thinned: the waves below are exact.")).format(n=stride))
    st.caption(_("Left columns change every token, right columns hardly at all: each position gets a unique "
                 "pattern, like the hands of a clock turning at many speeds."))
    st.latex(r"\begin{gathered} PE(p, 2i) = \sin(p\,\omega_i), \quad PE(p, 2i{+}1) = \cos(p\,\omega_i) \\ "
             r"\omega_i = \text{base}^{-2i/d}, \quad \lambda_i = 2\pi\,\text{base}^{2i/d} \end{gathered}")
    ss[DIMS_PICK] = dims
    st.multiselect(_("dimensions to draw as waves"), list(range(d_model)), key=DIMS_PICK, max_selections=8,
                   on_change=_dims_picked,
                   help=_("Even dimensions are sines, odd ones cosines. The wavelength λ is written beside each "
                          "curve."))
    if figs["waves"] is not None:
        chart(figs["waves"], "pos_fig_waves")
    st.markdown("#### " + _("Relative position is built in"))
    st.markdown(_("For one pair, {identity}, so {sum}: **only the offset {k} matters**, not where you start.").format(
        identity="$\\sin(p\\omega)\\sin((p{+}k)\\omega) + \\cos(p\\omega)\\cos((p{+}k)\\omega) = \\cos(k\\omega)$",
        sum="$PE(p)\\cdot PE(p{+}k) = \\sum_i \\cos(k\\,\\omega_i)$", k="$k$"))
    chart(figs["offset_dots"], "pos_fig_offset")
    st.caption(_("The curves for different start positions p lie on top of each other: largest difference {dev} "
                 "(float64 rounding).").format(dev=f"{figs['max_dev']:.1e}"))
    with st.container(horizontal=True, gap="small", vertical_alignment="center", key="pos_similarity_row"):
        chart(figs["similarity"], "pos_fig_similarity", width="content")
        with st.container(width=SIMILARITY_CAPTION_PX):
            st.caption(_("Constant along every diagonal (a Toeplitz matrix): the similarity of two positions is a "
                         "function of p − q only. The dark red diagonal is each position with itself (|PE(p)|² = "
                         "d_model / 2); away from it the dot product drops, so nearby positions look alike."))
    st.info(_(
        "**Learned absolute positions (GPT-2).** GPT-2 has no formula: its position table `wpe` is a learned "
        "1024 × 768 matrix, one row per position, trained like the word embeddings. Position 1,024 has no row at "
        "all, so the model cannot even be run past its trained length, and rows near the end saw the fewest "
        "training examples. Nothing ties row p to row p+k, so 'three tokens apart' must be learned separately at "
        "every position. The sine waves above can be evaluated at any p, but a model trained up to length L has "
        "never seen the combinations of phases beyond L, so it extrapolates poorly too (Press et al., ALiBi, "
        "2021). RoPE, next, puts position into the attention score itself, where only the distance survives."),
        icon=":material/straighten:")


def rope_view(cfg, name: str) -> None:
    ss = st.session_state
    if not cfg.uses_rope:
        st.info(_("{model} does not use RoPE (it learned its positions: see the tab The model's positions). The "
                  "rotation below is drawn at RoPE's usual base, 10,000, for heads of {d} numbers like this "
                  "model's.").format(model=name, d=cfg.head_dim), icon=":material/info:")
    own = cfg.uses_rope
    model_base = cfg.rope_theta if own else ROPE_PAPER_BASE
    half = cfg.head_dim // 2
    st.caption(_("RoPE (Su et al., 2021) adds nothing to the embedding. Inside every attention layer it **rotates** "
                 "each 2-D pair of a query and a key by an angle proportional to the token's position {m}; pair {i} "
                 "turns at speed {theta}.").format(m="$m$", i="$i$", theta="$\\theta_i = \\text{base}^{-2i/d}$"))
    bases = sorted({*ROPE_BASES, float(model_base), float(ss.get(ROT_BASE.key) or model_base)})
    ss[ROT_BASE.key] = float(ss.get(ROT_BASE.key) or model_base)
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):   # one row at 1024 px
        st.selectbox(_("base"), bases, key=ROT_BASE.key, width=180, **controls.PERSIST,
                     format_func={b: _("{base} (model)").format(base=f"{b:,.0f}") if b == model_base and own
                                  else f"{b:,.0f}" for b in bases}.get)
        st.slider(_("positions 0 … n−1"), 2, 512, key=ROT_N.key, width=170, **controls.PERSIST)
        st.slider(_("left: pair i"), 0, half - 1, key=PAIR_A.key, width=140, **controls.PERSIST)
        st.slider(_("right: pair i"), 0, half - 1, key=PAIR_B.key, width=140, **controls.PERSIST)
    figs = rope_theory_figures(cfg.head_dim, model_base, float(ss[ROT_BASE.key]),
                               (int(ss[PAIR_A.key]), int(ss[PAIR_B.key])), int(ss[ROT_N.key]), cfg.max_positions,
                               translated(V.WORDS), own)
    a, b = st.columns(2)
    with a:
        chart(figs["rotations"][0], "pos_fig_rot_a")
    with b:
        chart(figs["rotations"][1], "pos_fig_rot_b")
    st.caption(_("The vector (1, 0) placed at positions 0, 1, …, n−1 (pale arrow: position 0, red arrow: the last "
                 "position). Fast pairs spin round many times and tell neighbours apart; slow pairs barely move and "
                 "still differ for tokens thousands apart."))
    st.latex(r"\begin{pmatrix} x'_{a} \\ x'_{b} \end{pmatrix} = \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i "
             r"\\ \sin m\theta_i & \cos m\theta_i \end{pmatrix} \begin{pmatrix} x_{a} \\ x_{b} \end{pmatrix}, "
             r"\qquad \langle R_m q,\; R_n k \rangle = \langle q,\; R_{n-m}\, k \rangle")
    st.caption(_("Rotations add their angles and {transpose}, so in the dot product of a query at {m} with a key at "
                 "{n} only the distance is left.").format(transpose="$R_m^\\top = R_{-m}$", m="$m$", n="$n$"))
    chart(figs["frequencies"], "pos_fig_freqs")
    if not own:
        return
    lam = P.wavelengths(P.rope_frequencies(cfg.head_dim, cfg.rope_theta))
    st.caption(_("head_dim = {d}: {half} pairs. With this model's base {base}, pair 0 turns once every {fast} tokens "
                 "and pair {last} once every {slow} tokens, beyond its {context}-token context: the slowest pairs "
                 "never complete a turn. A larger base stretches all wavelengths, which is how long-context models "
                 "keep far positions apart.").format(
        d=cfg.head_dim, half=half, base=f"{cfg.rope_theta:,.0f}", fast=f"{lam[0]:.1f}", last=half - 1,
        slow=f"{lam[-1]:,.0f}", context=f"{cfg.max_positions:,}"))
    st.markdown("#### " + _("Which dimensions form a pair? Two conventions"))
    chart(figs["pairing"], "pos_fig_pairing")
    st.markdown(_(
        "The maths is identical; only the storage order differs. The RoPE paper rotates **adjacent** dimensions "
        "(2i, 2i+1); Hugging Face's `rotate_half` rotates dimension i with **i + d/2**. **This model uses "
        "half-split pairs (i, i+{half})**, and here is why: it was trained in the Hugging Face layout. "
        "llama.cpp's converter permuted the rows of the Q and K weight matrices so that its interleaved "
        "(adjacent-pair) RoPE gives the same result, and stored the GGUF file that way. When this app loads the "
        "file it un-permutes those rows back ({code}), so the decoder rotates half-split pairs with "
        "`model/positional.py`'s `apply_rope(..., convention=\"half\")`. Mixing the two is wrong but looks fine on "
        "one token (position 0 is not rotated): the unit tests check it on long inputs.").format(
        half=half, code=f"`W.reshape(n_heads, {half}, 2, d_in).swapaxes(1, 2)`") if cfg.architecture == "llama" else _(
        "The maths is identical; only the storage order differs. The RoPE paper rotates **adjacent** dimensions "
        "(2i, 2i+1); Hugging Face's `rotate_half` rotates dimension i with **i + d/2**. **This model uses "
        "half-split pairs (i, i+{half})**: {architecture} files keep the Hugging Face layout (llama.cpp rotates "
        "them the NEOX way, in half-split pairs too), so the decoder reads their q and k rows as they are. Mixing "
        "the two conventions is wrong but looks fine on one token (position 0 is not rotated): the unit tests "
        "check it on long inputs.").format(half=half, architecture=cfg.architecture))


def learned_view(lm) -> None:
    """A model without RoPE (GPT-2): its learned position table instead of the rotation."""
    table = lm.position_embedding
    n = min(int(table.shape[0]), S.MAX_PE_POSITIONS)
    sim, waves, explained = session.workspace(lm).compute(pure, P.learned_positions, table.numpy(), n)
    st.info(_("{model} does not use RoPE: it learned one vector of {d} numbers for each of its {n} positions and "
              "adds it to the token's embedding before layer 0. Here is that table.").format(
        model=lm.name, d=lm.config.d_model, n=f"{table.shape[0]:,}"), icon=":material/info:")
    shown = P.thin(n, MAX_CELLS)
    words = translated(V.WORDS)
    a, b = st.columns([SIMILARITY_PX, 1000 - SIMILARITY_PX])
    with a:
        chart(V.learned_similarity_figure(sim[np.ix_(shown, shown)], shown, size=SIMILARITY_PX, words=words),
              "pos_fig_learned_sim", width=SIMILARITY_PX)
    with b:
        st.caption(_("Each cell compares the position vectors of p and q. Nearby positions have similar vectors (the "
                     "bright band along the diagonal): the model learned an order, nobody wrote it in. Sinusoidal "
                     "encodings build the same band by design (tab: Sinusoidal PE)."))
    chart(V.principal_waves_figure(np.arange(n), waves, explained, words=words), "pos_fig_learned_waves")
    st.caption(_("The directions along which the position vectors vary most: the first {k} explain {share} of the "
                 "table's variance. Each line is a smooth wave over position, slow for the first component and "
                 "faster for the next: learned, they look much like the sine waves of the 2017 encoding.").format(
        k=len(explained), share=f"{explained.sum():.0%}"))


def model_view(cfg) -> None:
    ss = st.session_state
    trace = shell.current_trace()
    if trace is None:
        shell.stop()
    layer, head, m, hide_sink = ss[S.LAYER.key], ss[S.HEAD.key], ss[S.QUERY.key], bool(ss[S.SINK.key])
    detail = session.workspace().layer_detail(trace.text, layer)
    strongest = P.strongest_key(detail.pattern[head, m], m)
    if ss.get(KEY.key) is not None and ss[KEY.key] > m:
        ss[KEY.key] = None
    n = strongest if ss.get(KEY.key) is None else int(ss[KEY.key])
    ss[KEY_PICK] = n
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        controls.query_slider(trace, label=_("Query token m"), width=300)
        st.selectbox(_("Key token n (n ≤ m)"), range(m + 1), key=KEY_PICK, width=220,
                     on_change=controls.follow_pick, args=(KEY_PICK, KEY.key, strongest),
                     format_func=lambda i: token_label(trace.tokens, i, 24),
                     help=_("Default: the key this head attends to most from m, apart from token 0 (the sink)."))
        st.selectbox(_("Distances up to"), S.DISTANCE_OPTIONS, key=DISTANCE.key, width=150, **controls.PERSIST,
                     format_func={d: _("{n} tokens").format(n=f"{d:,}") for d in S.DISTANCE_OPTIONS}.get)
    figs = model_figures(detail, trace.tokens, head, cfg.kv_head_of(head), cfg.head_dim, cfg.rope_theta, m, n,
                         int(ss[DISTANCE.key]), hide_sink, max_shift=cfg.max_positions - 1 - m,
                         words=translated(V.WORDS))
    st.caption(_("Layer {layer}, head {head} (reads KV head {kv}) · query m = {query} · key n = {key} · distance "
                 "m − n = {distance}.").format(layer=layer, head=head, kv=cfg.kv_head_of(head),
                                                query=token_label(trace.tokens, m), key=token_label(trace.tokens, n),
                                                distance=m - n))
    chart(figs["pairs"], "pos_fig_pairs")
    st.caption(_("The {pairs} pairs of q (token {m}) and k (token {n}). Each circle is one pair i (its wavelength λ in "
                 "tokens above it), scaled to its longest arrow. Pale dashed: the vectors the projection produced; "
                 "solid: after RoPE turned q by m·θᵢ and k by n·θᵢ. Only the angle between q and k after rotation, "
                 "(m−n)·θᵢ plus their original angle, counts.").format(pairs=cfg.head_dim // 2, m=m, n=n))
    chart(figs["contributions"], "pos_fig_contrib")
    scaled = figs["score"] * np.sqrt(cfg.head_dim)
    st.caption(_("q_rot · k_rot = Σ pairs = {sum}; the model's score × √{d} = {scaled} (difference {diff}, float32 "
                 "rounding). Outlined bars: the same q and k without rotation.").format(
        sum=f"{figs['sum']:.5f}", d=cfg.head_dim, scaled=f"{scaled:.5f}", diff=f"{abs(figs['sum'] - scaled):.1e}"))
    st.markdown("#### " + _("Only the distance m − n matters: proven on these real vectors"))
    chart(figs["shift"], "pos_fig_shift")
    dev = "; ".join(_("{label}: max deviation {d}").format(label=label, d=f"{d:.1e}")
                    for label, d in figs["deviations"].items())
    st.caption(_("Same q and k content placed at (m+s, n+s) for shifts s up to {shift} (the context limit). Each line "
                 "is flat up to float32 rounding ({dev}). Changing the distance changes the score.").format(
        shift=f"{cfg.max_positions - 1 - m:,}", dev=dev))
    st.markdown("#### " + _("As the distance grows"))
    chart(figs["distance"], "pos_fig_distance")
    st.caption(_("This q/k pair's score with the key at 0 and the query Δ tokens later. Fast pairs average out "
                 "quickly and the slow ones drift: the score oscillates and its swings shrink. Dotted: the same "
                 "lengths with every pair starting aligned, the long-range decay from the RoPE paper."))
    st.markdown("#### " + _("With and without RoPE"))
    st.button(_("Open the strongest previous-token head"), key="pos_prev_head", on_click=_open_prev_token_head,
              args=(trace.text,),
              help=_("Picks the layer and head that put the most attention on the token just before (on this "
                     "text). Its diagonal is made by RoPE: watch it vanish on the right."))
    chart(figs["patterns"], "pos_fig_patterns")
    st.caption(_("Left: the model's own pattern. Right: the same q and k, softmax of masked q·k/√d with the rotation "
                 "switched off. Without the rotation the score sees only what q and k contain, not how far apart "
                 "they are: heads that rely on distance (previous-token, local) change the most. Grey: future keys "
                 "(causal mask); with the sink hidden also key 0 and rows 0-1.") if hide_sink else
               _("Left: the model's own pattern. Right: the same q and k, softmax of masked q·k/√d with the rotation "
                 "switched off. Without the rotation the score sees only what q and k contain, not how far apart "
                 "they are: heads that rely on distance (previous-token, local) change the most. Grey: future keys "
                 "(causal mask)."))
    token_legend(trace.tokens)


def _open_prev_token_head(text: str) -> None:
    """Button callback: select the head with the highest previous-token score on the current text."""
    ss = st.session_state
    stats = session.workspace().compute(head_statistics, text, False)["prev_token"]      # [L, H]
    layer, head = np.unravel_index(int(np.nanargmax(stats)), stats.shape)
    ss[S.LAYER.key], ss[S.HEAD.key], ss[KEY.key] = int(layer), int(head), None


def alibi_figures(n_heads: int, head: int, n_positions: int, max_distance: int, head_dim: int,
                  model_base: float | None) -> dict:
    """model_base: the model's RoPE base, None for a model without RoPE (then RoPE is drawn at 10,000 only)."""
    slopes = A.alibi_slopes(n_heads)
    distances = np.arange(max_distance + 1)
    rope = {} if model_base is None else {_("RoPE, base {base} (this model)").format(base=f"{model_base:,.0f}"):
                                          A.rope_decay(head_dim, model_base, distances)}
    if model_base != 10_000.0:
        rope[_("RoPE, base 10,000")] = A.rope_decay(head_dim, 10_000.0, distances)
    return {
        "slopes": VE.slopes_figure(slopes, selected=head, title=_("Slope m of each head"), x_title=_("head"),
                                   y_title=_("slope m (log scale)")),
        "bias": VE.bias_heatmap(A.alibi_bias(slopes, n_positions)[head],
                                title=_("Head {h}: bias −m·(i − j)").format(h=head),
                                x_title=_("key position j"), y_title=_("query position i"), value_word=_("bias")),
        "distance": VE.alibi_rope_figure(
            distances, A.alibi_weight_by_distance(slopes, distances),
            [_("head {h}, m = {m:.4g}").format(h=h, m=m) for h, m in enumerate(slopes)], head, rope,
            titles=(_("ALiBi: weight of a key Δ tokens back, exp(−m Δ), same content"),
                    _("RoPE: score of aligned content Δ tokens apart, relative to Δ = 0")),
            x_title=_("distance Δ (tokens)"), y_titles=(_("relative weight"), _("relative score"))),
        "slope": float(slopes[head]),
    }


def alibi_view(cfg) -> None:
    ss = st.session_state
    st.caption(_("ALiBi (Press et al., 2022) has no position embedding and no rotation: each head adds a fixed "
                 "penalty −m·(i − j) to the score of a key i − j tokens back. The slopes m form a geometric "
                 "sequence, so some heads look far back and others only at their neighbours."))
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        # one row at 1024 px (the charts below start on the first screen): 150 + 150 + 160 + 120 and the gaps
        st.slider(_("heads"), 1, S.MAX_ALIBI_HEADS, key=ALIBI_HEADS.key, width=150, **controls.PERSIST,
                  help=_("This model has {n} heads. For a power of two n the slopes are 2^(−8/n), 2^(−16/n), …; "
                         "other counts take the closest power of two and fill in from twice as many.").format(
                      n=cfg.n_heads))
        heads = int(ss[ALIBI_HEADS.key])
        ss[ALIBI_HEAD.key] = min(int(ss[ALIBI_HEAD.key]), heads - 1)
        if heads > 1:
            st.slider(_("head"), 0, heads - 1, key=ALIBI_HEAD.key, width=150, **controls.PERSIST)
        st.slider(_("positions in the matrix"), 4, 128, key=ALIBI_N.key, width=160, **controls.PERSIST)
        st.selectbox(_("distances up to"), S.DISTANCE_OPTIONS, key=ALIBI_DIST.key, width=120, **controls.PERSIST,
                     format_func=lambda d: f"{d:,}")
    head = int(ss[ALIBI_HEAD.key])
    figs = alibi_figures(heads, head, int(ss[ALIBI_N.key]), int(ss[ALIBI_DIST.key]), cfg.head_dim, cfg.rope_theta)
    a, b = st.columns(2)
    with a:
        chart(figs["slopes"], "pos_fig_alibi_slopes")
    with b:
        chart(figs["bias"], "pos_fig_alibi_bias")
    st.caption(_("Head {h} subtracts {m:.4g} per token of distance: a key {d} tokens back loses {p:.2f} from its "
                 "score, so it gets e^−{p:.2f} = {w} of the weight the same key would get right next to the "
                 "query.").format(h=head, m=figs["slope"], d=16, p=16 * figs["slope"],
                                  w=f"{100 * np.exp(-16 * figs['slope']):.2g}%"))
    chart(figs["distance"], "pos_fig_alibi_distance")
    st.caption(_("ALiBi's penalty grows without end: far keys fade out, smoothly and the same at every position, "
                 "which is why it extrapolates to texts longer than those it was trained on. RoPE has no penalty "
                 "as such: only content whose pairs line up gets a score that shrinks with distance, and it "
                 "oscillates rather than vanishing (a larger base decays more slowly)."))


def render() -> None:
    """The page: the open view (sine waves, RoPE, ALiBi, the model's own positions)."""
    shell.header(_("Positional encodings"), _("Attention alone is order-blind. Two fixes: **add** position vectors "
                                              "to the input (sine waves, 2017; learned, GPT-2) or **rotate** queries "
                                              "and keys inside attention (RoPE, 2021; Llama, Qwen)."))
    lm = session.get_model()
    cfg = lm.config
    views = S.POSITIONAL_VIEWS if cfg.uses_rope else {**S.POSITIONAL_VIEWS, "model": N_("The model's positions")}
    view, tab = controls.view_tabs(VIEW, views)
    with tab:
        if view == "sin":
            sinusoidal_view()
        elif view == "rope":
            rope_view(cfg, lm.name)
        elif view == "alibi":
            alibi_view(cfg)
        elif cfg.uses_rope:
            model_view(cfg)
        else:
            learned_view(lm)

