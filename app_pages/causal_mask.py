"""Causal mask: the selected head's scores before the mask, the mask, the masked scores, the softmax, and the same
softmax without the mask (the future leak), on the user's own text; then a 4-token worked example with numbers."""
from __future__ import annotations

import numpy as np
import streamlit as st

from app_pages import _state as state
from app_pages._widgets import escape_markdown, show_figure, token_label
from model.sampling import softmax
from viz.mask import leak_bars, mask_heatmap, matrix_heatmap

K = "mask_"                 # prefix of this page's widget keys
DEFAULT_N_TOKENS = 24       # cells stay readable up to about this many tokens
EXAMPLE_TOKENS = 4


def masked_views(scores: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """scores [T, T], mask [T, T] -> masked scores (-inf), softmax with and without the mask, future share."""
    masked = np.where(mask, scores, -np.inf)
    probs = softmax(masked, axis=-1)                  # = the model's attention pattern
    unmasked = softmax(scores, axis=-1)               # every key, future included
    leak = np.where(mask, 0.0, unmasked).sum(axis=-1)
    return {"masked": masked, "probs": probs, "unmasked": unmasked, "leak": leak}


def _vector(values) -> str:
    return "[" + ", ".join("−∞" if np.isneginf(v) else f"{v:.2f}".replace("-", "−") for v in values) + "]"


st.title("Causal mask")
trace = state.current_trace()
if trace is None:
    st.stop()
state.layer_head_controls()
sel = state.selection(trace)
T = trace.n_tokens
detail = state.get_layer_detail(trace.text, state.DEFAULT_MAX_TOKENS, sel.layer)

st.markdown(
    "A decoder reads text left to right. Before the softmax, every **future** key (j > i) gets a score of "
    "**−∞**, so after the softmax its weight is exactly 0. These are the real numbers of "
    f"**layer {sel.layer}, head {sel.head}** on your text: pick another one in the sidebar.")

with st.expander("Why must a decoder not look ahead?", expanded=False):
    st.markdown(
        "- **Training is parallel.** One pass over a text trains the model to predict *every* next token at once: "
        "position 0 predicts token 1, position 1 predicts token 2, and so on.\n"
        "- **Looking ahead would be copying the answer.** Without the mask, position i could simply attend to "
        "token i + 1, the very token it has to predict. Training would reward copying, not understanding.\n"
        "- **At generation time the future does not exist.** The model writes one token at a time; when it "
        "predicts token i + 1, tokens i + 2, i + 3, … have not been written yet. The mask makes training match "
        "that situation exactly.\n"
        "- **Masking before the softmax, not after.** Adding −∞ to a score makes exp(−∞) = 0, so the remaining "
        "weights still sum to 1. Zeroing probabilities after the softmax would leave rows that no longer sum to 1.")

c_n, c_layout = st.columns([3, 1], vertical_alignment="bottom")
with c_n:
    if T >= 3:
        st.session_state.setdefault(K + "n_tokens", min(DEFAULT_N_TOKENS, T))
        st.session_state[K + "n_tokens"] = max(2, min(int(st.session_state[K + "n_tokens"]), T))
        n = st.slider("Show the first N tokens", 2, T, key=K + "n_tokens",
                      help=f"Your text has {T} tokens. Fewer tokens give bigger cells. Because of the mask, the "
                           "first N rows are exactly the same as in the full text.")
    else:
        n = T
with c_layout:
    side_by_side = st.toggle("Side by side", value=False, key=K + "side_by_side",
                             help="Two matrices per row, for a wide screen. Off (the default): one matrix per "
                                  "row at the full width, readable on a projector or a laptop.")


def pair():
    """Two places for two figures: columns side by side, or one under the other at full width."""
    return st.columns(2, gap="medium") if side_by_side else (st.container(), st.container())


# x-axis token labels per matrix: a full-width matrix on a 1024 px screen is ~400 px wide and a 45° label needs
# ~20 px; half-width ones get half as many (the y axis thins itself to the figure's height)
labels_max = 10 if side_by_side else 20
tokens = trace.tokens[:n]
scores = np.asarray(detail.scores[sel.head, :n, :n], dtype=np.float64)    # [n, n]
mask = np.asarray(detail.mask[:n, :n], dtype=bool)                        # [n, n]
views = masked_views(scores, mask)
sink_hidden = sel.hide_sink and n >= 2
probs_shown = state.apply_sink(views["probs"], sel.hide_sink)
unmasked_shown = state.apply_sink(views["unmasked"], sel.hide_sink)
hidden = np.zeros((n, n), dtype=bool)
if sink_hidden:
    hidden[1:, 0] = True
zmax = float(max(np.where(hidden, 0, probs_shown).max(), np.where(hidden, 0, unmasked_shown).max()))
name = f"L{sel.layer}_H{sel.head}"

st.subheader("1 → 2 → 3 → 4: from scores to attention")
c1, c2 = pair()
with c1:
    show_figure(matrix_heatmap(scores, tokens, kind="scores", title="1. Scores q·k / √d",
                               max_labels=labels_max), key=K + "scores", filename=f"scores_{name}")
    st.caption("Before the mask, every query i has a score for every key j, the future included: "
               f"q_i · k_j / √{state.get_model().config.head_dim}. Red = high, blue = low.")
with c2:
    show_figure(mask_heatmap(mask, tokens, title="2. The mask", max_labels=labels_max),
                key=K + "mask", filename="causal_mask")
    st.caption("The mask is added to the scores: 0 where j ≤ i (the token itself and the past), −∞ where j > i "
               "(grey).")
c3, c4 = pair()
with c3:
    show_figure(matrix_heatmap(views["masked"], tokens, kind="scores", allowed=mask, title="3. Scores + mask",
                               max_labels=labels_max), key=K + "masked", filename=f"masked_scores_{name}")
    st.caption("Masked scores. Grey cells are −∞: not a very low score, but no score at all.")
with c4:
    show_figure(matrix_heatmap(probs_shown, tokens, kind="probs", allowed=mask, hidden=hidden, zmax=zmax,
                               title="4. softmax → attention", max_labels=labels_max),
                key=K + "probs", filename=f"attention_{name}")
    st.caption("softmax of the masked scores: each row sums to 1 over the past only; exp(−∞) = 0 puts exactly 0 on "
               "the future (grey)."
               + (" Key 0 (the attention sink) is hidden (light grey) and the rows renormalized." if sink_hidden else
                  " Only column 0 lit up? That is the attention sink: hide it in the sidebar."))

st.subheader("Without the mask: the future leaks in")
c5, c6 = pair()
with c5:
    show_figure(matrix_heatmap(unmasked_shown, tokens, kind="probs", future_outline=True, hidden=hidden, zmax=zmax,
                               title="softmax with no mask", max_labels=labels_max),
                key=K + "unmasked", filename=f"attention_no_mask_{name}")
    st.caption(f"The same scores, softmax over all {n} keys shown (same colour scale as step 4). Everything right "
               "of the red "
               "staircase is attention to tokens that come later: information the model would not have when "
               "generating.")
with c6:
    show_figure(leak_bars(views["leak"], tokens, title="Share that goes to the future", max_labels=labels_max),
                key=K + "leak", filename=f"future_leak_{name}")
    worst = int(np.argmax(views["leak"]))
    st.caption(f"Without the mask, query **{escape_markdown(token_label(tokens, worst))}** would put "
               f"{views['leak'][worst]:.0%} of its attention on later tokens. The last row has no future, so its "
               "share is always 0. (Exact values, sink included.)")

st.subheader(f"Worked example: the first {min(EXAMPLE_TOKENS, T)} tokens, with numbers")
m = min(EXAMPLE_TOKENS, T)
ex_tokens = trace.tokens[:m]
ex_scores = np.asarray(detail.scores[sel.head, :m, :m], dtype=np.float64)
ex = masked_views(ex_scores, np.asarray(detail.mask[:m, :m], dtype=bool))
e1, e2 = st.columns(2, gap="medium")          # 4 × 4 with numbers: readable at half the width, whatever the toggle
with e1:
    show_figure(matrix_heatmap(ex_scores, ex_tokens, kind="scores", show_values=True, title="Scores",
                               height=340), key=K + "ex_scores", filename=f"example_scores_{name}")
with e2:
    show_figure(matrix_heatmap(ex["masked"], ex_tokens, kind="scores", allowed=ex["masked"] > -np.inf,
                               show_values=True, title="Masked scores", height=340),
                key=K + "ex_masked", filename=f"example_masked_{name}")
e3, e4 = st.columns(2, gap="medium")
with e3:
    show_figure(matrix_heatmap(ex["probs"], ex_tokens, kind="probs", allowed=ex["masked"] > -np.inf,
                               show_values=True, zmax=1.0, title="softmax with the mask", height=340),
                key=K + "ex_probs", filename=f"example_attention_{name}")
with e4:
    show_figure(matrix_heatmap(ex["unmasked"], ex_tokens, kind="probs", show_values=True, zmax=1.0,
                               future_outline=True, title="softmax without the mask", height=340),
                key=K + "ex_unmasked", filename=f"example_no_mask_{name}")
if m >= 2:
    # the row with both a past and a future (1 .. m-2) that would leak the most; row 0 for two tokens
    r = 1 + int(np.argmax(ex["leak"][1 : m - 1])) if m >= 3 else 0
    weights = np.exp(ex["masked"][r] - ex["masked"][r].max())
    st.markdown(
        f"**Row {r}** (query {escape_markdown(token_label(ex_tokens, r))}) step by step:\n\n"
        f"1. scores: `{_vector(ex_scores[r])}`\n"
        f"2. add the mask: `{_vector(ex['masked'][r])}`\n"
        f"3. exp(score − max): `{_vector(weights)}` (exp(−∞) = 0)\n"
        f"4. divide by their sum {weights.sum():.2f}: `{_vector(ex['probs'][r])}`, which sums to 1\n\n"
        f"Without the mask the same row is `{_vector(ex['unmasked'][r])}`: {ex['leak'][r]:.0%} of it would go to "
        f"the {m - 1 - r} later token{'s' if m - 1 - r != 1 else ''}.")
    st.caption("The worked example shows exact values: the attention-sink switch does not apply here.")
else:
    st.caption("Type a longer text to see a row with both a past and a future.")
