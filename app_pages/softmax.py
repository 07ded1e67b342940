"""Softmax & temperature: one distribution from the real run (the next-token logits, or a head's attention scores
for the selected query), reshaped by a log-scale temperature, filtered by top-k / top-p, and sampled with a seed."""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.softmax
from app_core import schemas as S
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import _, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, escape_markdown, show_figure, token_label, token_legend
from model.maths.sampling import (
    T_MAX,
    T_MIN,
    effective_choices,
    entropy_bits,
    expected_total_variation,
    filter_probs,
    sample,
    sample_counts,
    softmax,
    temperature_grid,
    temperature_sweep,
    top_buckets,
    total_variation,
)

vs = SharedBuilders(viz.softmax)

SOURCE = S.SOFTMAX.by_name("source")
TEMP = S.SOFTMAX.by_name("temp")
TOP_K, TOP_P = S.SOFTMAX.by_name("top_k"), S.SOFTMAX.by_name("top_p")
SEED, DRAWS = S.SOFTMAX.by_name("seed"), S.SOFTMAX.by_name("draws")
TOP_ROWS = 20                                    # bars shown
BARS_HEIGHT = 470                                # the bars fit under the temperature slider on a 768 px screen
SWEEP = np.geomspace(T_MIN, T_MAX, 97)           # temperatures of the curves
GRID = temperature_grid(T_MIN, T_MAX)            # slider stops, log-spaced
SHOWN_DRAWS = 16


def labels_for(ids, labels_all: list[str] | None, lm) -> list[str]:
    """The candidates' labels: the keys' tokens (attention scores) or the vocabulary's (next-token logits)."""
    ids = [int(i) for i in ids]
    return [labels_all[i] for i in ids] if labels_all is not None else lm.token_strings(ids)


def distribution(trace, source: str) -> tuple[np.ndarray, list[str] | None, str]:
    """The scores to reshape (logits), their labels (None: the vocabulary's) and a sentence on what they are; the
    attention source draws its query slider."""
    ss = st.session_state
    if source != "attention":
        logits = np.asarray(trace.next_token_logits, dtype=np.float64)
        what = _("The model's {n} next-token logits after your text (last token: {token}). Sampling from them is how "
                 "the model writes.").format(n=f"{len(logits):,}",
                                             token=escape_markdown(token_label(trace.tokens, trace.n_tokens - 1)))
        return logits, None, what
    layer, head, query = ss[S.LAYER.key], ss[S.HEAD.key], ss[S.QUERY.key]
    controls.query_slider(trace, label=_("Query token i"))
    detail = session.workspace().layer_detail(trace.text, layer)
    logits = np.asarray(detail.scores[head, query, : query + 1], dtype=np.float64)     # keys j <= query
    labels_all = [token_label(trace.tokens, j) for j in range(query + 1)]
    sink_hidden = bool(ss[S.SINK.key]) and query >= 1
    if sink_hidden:
        logits[0] = -np.inf                                  # hidden: the softmax renormalizes over j = 1..query
    values = dict(layer=layer, head=head, query=escape_markdown(token_label(trace.tokens, query)), n=query + 1)
    what = " ".join(
        [(_("Layer {layer}, head {head}: scores of query {query} over its {n} allowed keys (key 0, the sink, hidden). "
            "At T = 1 this is exactly the head's attention row.") if sink_hidden else
          ngettext("Layer {layer}, head {head}: scores of query {query} over its {n} allowed key. At T = 1 this is "
                   "exactly the head's attention row.",
                   "Layer {layer}, head {head}: scores of query {query} over its {n} allowed keys. At T = 1 this is "
                   "exactly the head's attention row.", query + 1)).format(**values)]
        + ([_("The first token can only attend to itself: pick a later query.")] if query == 0 else []))
    return logits, labels_all, what


def render() -> None:
    """The page: the distribution at a temperature, top-k / top-p, the temperature curves, seeded draws."""
    ss = st.session_state
    shell.header(_("Softmax & temperature"),
                 _("Softmax turns scores (logits) into probabilities, {formula}. Dividing by a temperature T < 1 "
                   "sharpens the distribution toward the top choice, T > 1 flattens it toward uniform; the order "
                   "never changes.").format(formula="$p_i = e^{z_i/T} / \\sum_j e^{z_j/T}$"))
    trace = shell.current_trace()
    if trace is None:
        shell.stop()
    lm = session.get_model()
    words = translated(vs.WORDS)

    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        st.segmented_control(_("Distribution"), list(S.SOFTMAX_SOURCES),
                             format_func={s: _(v) for s, v in S.SOFTMAX_SOURCES.items()}.get, key=SOURCE.key,
                             required=True, **controls.PERSIST,
                             help=_("Next-token logits: the model's scores for every token of its vocabulary after "
                                    "your text. Attention scores: one head's q·k/√d for the query token (keys j ≤ "
                                    "i)."))
        value = float(ss[TEMP.key])
        st.select_slider(_("Temperature T (log scale)"), options=sorted({*GRID, value}), key=TEMP.key, width=300,
                         format_func=lambda t: f"{t:g}", **controls.PERSIST,
                         help=_("From {low} (almost always the top choice) to {high} (almost uniform). Stops are "
                                "evenly spaced on a log scale; 1 is the model's own distribution.").format(
                             low=f"{T_MIN:g}", high=f"{T_MAX:g}"))
    temperature = float(ss[TEMP.key])
    logits, labels_all, what = distribution(trace, ss[SOURCE.key])
    probs, kept, n_candidates = probabilities(lm, logits, labels_all, temperature, what, words)
    temperature_section(logits, probs, temperature, n_candidates, words)
    sampling_section(lm, kept, labels_all, words)


def probabilities(lm, logits: np.ndarray, labels_all: list[str] | None, temperature: float, what: str,
                  words) -> tuple[np.ndarray, np.ndarray, int]:
    """The bars at this temperature, the entropy line and the top-k / top-p inputs; returns the probabilities, the
    kept ones renormalized and the number of candidates."""
    ss = st.session_state
    probs = softmax(logits, temperature)
    n_candidates = int((probs > 0).sum())
    order = np.argsort(-probs, kind="stable")
    rows = order[: min(TOP_ROWS, n_candidates)]
    keep, kept = filter_probs(probs, top_k=int(ss[TOP_K.key]) or None, top_p=float(ss[TOP_P.key]))
    shown_labels = labels_for(rows, labels_all, lm)
    title = (_("Top {shown} of {n} at T = {t}") if n_candidates > len(rows) else _("All {n} keys at T = {t}")).format(
        shown=len(rows), n=f"{n_candidates:,}", t=f"{temperature:g}")
    show_figure(vs.probability_bars(shown_labels, probs[rows], keep=keep[rows], renormalized=kept[rows], title=title,
                                 height=BARS_HEIGHT, words=words), key="softmax_bars", filename="softmax_probabilities")
    rest = float(probs[order[len(rows):]].sum()) if n_candidates > len(rows) else 0.0
    st.caption(" ".join([what, _("Blue: kept by top-k / top-p; grey: dropped; red ticks: the kept candidates' "
                                 "probabilities after renormalizing (what sampling uses).")]
                        + ([_("The {n} candidates not shown hold {share} together.").format(
                            n=f"{n_candidates - len(rows):,}", share=f"{rest:.2%}")] if rest else [])))
    token_legend(shown_labels)

    st.markdown(_("Entropy **{entropy} bits** · effective choices **{effective}** · top-1 **{top1}** · kept "
                  "**{kept}** candidates holding **{share}**").format(
        entropy=f"{entropy_bits(probs):.2f}", effective=f"{effective_choices(probs):,.1f}", top1=f"{probs.max():.1%}",
        kept=f"{int(keep.sum()):,}", share=f"{probs[keep].sum():.1%}"),
                help=_("Entropy −Σ p log₂ p: 0 when one choice is certain, log₂ n for n equal choices. Effective "
                       "choices = 2^entropy: as uncertain as this many equally likely options."))

    st.markdown("#### " + _("Top-k and top-p: which candidates may be sampled"))
    c_k, c_p = st.columns(2)
    c_k.number_input(_("top-k (0 = off)"), min_value=0, max_value=lm.config.vocab_size, step=1, key=TOP_K.key,
                     **controls.PERSIST, help=_("Keep only the k most probable of the {n} candidates.").format(
                         n=f"{n_candidates:,}"))
    c_p.slider(_("top-p (1.00 = off)"), 0.01, 1.0, step=0.01, key=TOP_P.key, format="%.2f", **controls.PERSIST,
               help=_("Nucleus sampling: keep the smallest set of most probable candidates whose total probability "
                      "reaches p (after top-k)."))
    return probs, kept, n_candidates


def temperature_section(logits: np.ndarray, probs: np.ndarray, temperature: float, n_candidates: int,
                        words) -> None:
    """Entropy, top-1 and effective choices over the whole temperature range, the current T marked."""
    st.markdown("#### " + _("What temperature does to the whole distribution"))
    sweep = temperature_sweep(logits, SWEEP)
    show_figure(vs.temperature_curves(sweep["temperature"], sweep["entropy_bits"], sweep["top1"], sweep["effective"],
                                   current=temperature,
                                   current_values=(entropy_bits(probs), float(probs.max()),
                                                   float(effective_choices(probs))),
                                   words=words),
                key="softmax_curves", filename="softmax_temperature_curves")
    st.caption(_("Red: the current T = {t}. As T → 0 the distribution becomes greedy (all mass on the top choice, "
                 "entropy 0); as T grows it approaches uniform over the {n} candidates (entropy log₂ {n} = {bits} "
                 "bits).").format(t=f"{temperature:g}", n=f"{n_candidates:,}", bits=f"{np.log2(n_candidates):.2f}"))


def sampling_section(lm, kept: np.ndarray, labels_all: list[str] | None, words) -> None:
    """N seeded draws from the kept distribution: their histogram against the probabilities, the first draws."""
    ss = st.session_state
    st.markdown("#### " + _("Sampling: draw N times with a fixed seed"))
    c_seed, c_n = st.columns(2)
    c_seed.number_input(_("Seed"), min_value=0, max_value=2**31 - 1, step=1, key=SEED.key, **controls.PERSIST,
                        help=_("Same seed, same draws: change it to see another random run."))
    c_n.number_input(_("Number of draws N"), min_value=1, max_value=S.MAX_SAMPLES, step=100, key=DRAWS.key,
                     **controls.PERSIST, help=_("More draws: the frequencies get closer to the probabilities."))
    n_draws, seed = int(ss[DRAWS.key]), int(ss[SEED.key])
    counts = sample_counts(kept, n_draws, seed)
    ids, expected, observed = top_buckets(kept, counts, TOP_ROWS)
    hist_labels = labels_for(ids, labels_all, lm)
    others = int((kept > 0).sum()) - len(ids)
    if others:
        hist_labels.append(_("({n} other kept)").format(n=f"{others:,}"))
    else:
        expected, observed = expected[:-1], observed[:-1]
    show_figure(vs.sample_histogram(hist_labels, expected, observed, n_draws,
                                 words=words, title=_("{n} draws from the kept distribution (seed {seed})").format(
                                     n=f"{n_draws:,}", seed=seed)),
                key="softmax_histogram", filename="softmax_samples")
    first = labels_for(sample(kept, min(SHOWN_DRAWS, n_draws), seed), labels_all, lm)   # the first of the N draws
    gap, noise = total_variation(expected, observed), expected_total_variation(expected, n_draws)
    draws = " · ".join(escape_markdown(s) for s in first) + (" …" if n_draws > SHOWN_DRAWS else "")
    st.caption(_("First draws: {draws}").format(draws=draws) + "  \n" + _(
        "Blue: the kept probabilities (renormalized); orange: the share of the {n} draws. Over the {bars} bars shown "
        "they differ by {gap} in total (half the summed absolute difference); sampling noise alone gives about "
        "{noise} at this N, and that shrinks as 1/√N: 100 times more draws, 10 times closer.").format(
        n=f"{n_draws:,}", bars=len(expected), gap=f"{gap:.2%}", noise=f"{noise:.2%}"))

