"""Causal mask: the selected head's scores before the mask, the mask, the masked scores, the softmax, and the same
softmax without the mask (the future leak), on the user's own text; then a 4-token worked example with numbers."""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.mask
from app_core import schemas as S
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import _, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, escape_markdown, show_figure, token_label, token_legend
from model.analysis.head_stats import sink_hidden_view
from model.maths.masking import masked_views, most_leaking_row, softmax_steps

vm = SharedBuilders(viz.mask)

N = S.CAUSAL_MASK.by_name("n")
SIDE = S.CAUSAL_MASK.by_name("side")
EXAMPLE_TOKENS = 4
FULL_HEIGHT = 470          # one matrix per row: a ~340 px square on a 1024 px wide screen
PAIR_HEIGHT = 360          # two per row: equal squares, no colour bars (hover for values)


def _vector(values) -> str:
    return "[" + ", ".join("−∞" if np.isneginf(v) else f"{v:.2f}".replace("-", "−") for v in values) + "]"


def pair(side_by_side: bool):
    """Two places for two figures: columns side by side, or one under the other."""
    return st.columns(2, gap="small") if side_by_side else (st.container(), st.container())




def render() -> None:
    """The page: the four steps on the user's text, the future leak without the mask, a worked example."""
    ss = st.session_state
    shell.header(_("Causal mask"), _("Before the softmax every future key (j > i) gets a score of −∞, so its weight "
                                     "comes out exactly 0. These are the real numbers of the layer and head chosen in "
                                     "the sidebar."))
    trace = shell.current_trace()
    if trace is None:
        st.stop()
    cfg = session.get_model().config
    layer, head, hide_sink = ss[S.LAYER.key], ss[S.HEAD.key], bool(ss[S.SINK.key])
    T = trace.n_tokens
    detail = session.workspace().layer_detail(trace.text, layer)

    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        if T >= 3:
            st.slider(_("Show the first N tokens"), 2, T, key=N.key, width=380, **controls.PERSIST,
                      help=_("Your text has {n} tokens. Fewer tokens give bigger cells. Because of the mask, the "
                             "first N rows are exactly the same as in the full text.").format(n=T))
        st.toggle(_("Side by side"), key=SIDE.key, **controls.PERSIST,
                  help=_("Two matrices per row (equal squares, no colour bars: hover for the values). Off: one "
                         "matrix per row at a readable size."))
    n = min(T, int(ss[N.key] or T))
    name = f"L{layer}_H{head}"
    words = translated(vm.WORDS)
    masked_steps(trace.tokens[:n], detail.scores[head, :n, :n], detail.mask[:n, :n], cfg.head_dim, hide_sink,
                 bool(ss[SIDE.key]), name, words)
    worked_example(trace.tokens, detail.scores[head], detail.mask, min(EXAMPLE_TOKENS, T), name, words)
    why_expander()


def masked_steps(tokens: list[str], scores: np.ndarray, mask_rows: np.ndarray, head_dim: int, hide_sink: bool,
                 side_by_side: bool, name: str, words) -> None:
    """Scores, mask, masked scores, softmax of the first n tokens; then the softmax without the mask and the leak."""
    n = len(tokens)
    height = PAIR_HEIGHT if side_by_side else FULL_HEIGHT
    views = masked_views(scores, mask_rows)
    mask = np.asarray(mask_rows, dtype=bool)
    probs_shown = sink_hidden_view(views.probs) if hide_sink else views.probs
    unmasked_shown = sink_hidden_view(views.unmasked) if hide_sink else views.unmasked
    finite = np.concatenate([probs_shown[np.isfinite(probs_shown)], unmasked_shown[np.isfinite(unmasked_shown)]])
    zmax = float(finite.max()) if finite.size else 1.0
    scale = dict(show_scale=not side_by_side, **(dict(show_values=False) if side_by_side and n > 8 else {}))

    c1, c2 = pair(side_by_side)
    with c1:
        show_figure(vm.matrix_heatmap(views.scores, tokens, kind="scores", title=_("1. Scores q·k / √d"),
                                      height=height, words=words, **scale),
                    key="mask_scores", filename=f"scores_{name}")
        st.caption(_("Every query i has a score for every key j, the future included: q_i · k_j / √{d}. Red = high, "
                     "blue = low.").format(d=head_dim))
    with c2:
        show_figure(vm.mask_heatmap(mask, tokens, title=_("2. The mask"), height=height, words=words),
                    key="mask_mask", filename="causal_mask")
        st.caption(_("Added to the scores: 0 where j ≤ i (the token itself and the past), −∞ where j > i (grey)."))
    c3, c4 = pair(side_by_side)
    with c3:
        show_figure(vm.matrix_heatmap(views.masked, tokens, kind="scores", allowed=mask, title=_("3. Scores + mask"),
                                      height=height, words=words, **scale),
                    key="mask_masked", filename=f"masked_scores_{name}")
        st.caption(_("Grey cells are −∞: not a very low score, but no score at all."))
    with c4:
        show_figure(vm.matrix_heatmap(probs_shown, tokens, kind="probs", allowed=mask, sink_hidden=hide_sink,
                                      zmax=zmax, title=_("4. softmax → attention"), height=height, words=words,
                                      **scale), key="mask_probs", filename=f"attention_{name}")
        st.caption(_("Each row sums to 1 over the past only: exp(−∞) = 0 puts exactly 0 on the future. Key 0 (the "
                     "attention sink) is hidden and the rows renormalized; rows 0 and 1 have nothing left to show.")
                   if hide_sink else
                   _("Each row sums to 1 over the past only: exp(−∞) = 0 puts exactly 0 on the future. Only column 0 "
                     "lit up? That is the attention sink: hide it."))
    token_legend(tokens)

    st.markdown("#### " + _("Without the mask, the future leaks in"))
    c5, c6 = pair(side_by_side)
    with c5:
        show_figure(vm.matrix_heatmap(unmasked_shown, tokens, kind="probs", future_outline=True,
                                      sink_hidden=hide_sink, zmax=zmax, title=_("softmax with no mask"),
                                      height=height, words=words, **scale),
                    key="mask_unmasked", filename=f"attention_no_mask_{name}")
        st.caption(_("The same scores, softmax over all {n} keys shown (same colour scale as step 4). Right of the red "
                     "staircase: attention to tokens that come later, which the model would not have when "
                     "generating.").format(n=n))
    with c6:
        show_figure(vm.leak_bars(views.leak, tokens, title=_("Share that goes to the future"), max_labels=20,
                                 words=words),
                    key="mask_leak", filename=f"future_leak_{name}")
        worst = int(np.argmax(views.leak))
        st.caption(_("Without the mask, query **{token}** would put {share} of its attention on later tokens. The "
                     "last row has no future, so its share is always 0. (Exact values, sink included.)").format(
            token=escape_markdown(token_label(tokens, worst)), share=f"{views.leak[worst]:.0%}"))


def worked_example(tokens: list[str], scores: np.ndarray, mask_rows: np.ndarray, m: int, name: str, words) -> None:
    """The first m tokens with numbers, and the row that leaks most, step by step."""
    st.markdown("#### " + _("Worked example: the first {m} tokens, with numbers").format(m=m))
    ex_tokens = tokens[:m]
    ex = masked_views(scores[:m, :m], mask_rows[:m, :m])
    ex_allowed = np.asarray(mask_rows[:m, :m], dtype=bool)
    e1, e2 = st.columns(2, gap="small")          # 4 x 4 with numbers: readable at half the width, whatever the toggle
    with e1:
        show_figure(vm.matrix_heatmap(ex.scores, ex_tokens, kind="scores", show_values=True, title=_("Scores"),
                                      height=340, words=words),
                    key="mask_ex_scores", filename=f"example_scores_{name}")
        show_figure(vm.matrix_heatmap(ex.probs, ex_tokens, kind="probs", allowed=ex_allowed, show_values=True, zmax=1.0,
                                      title=_("softmax with the mask"), height=340, words=words),
                    key="mask_ex_probs", filename=f"example_attention_{name}")
    with e2:
        show_figure(vm.matrix_heatmap(ex.masked, ex_tokens, kind="scores", allowed=ex_allowed, show_values=True,
                                      title=_("Masked scores"), height=340, words=words), key="mask_ex_masked",
                    filename=f"example_masked_{name}")
        show_figure(vm.matrix_heatmap(ex.unmasked, ex_tokens, kind="probs", show_values=True, zmax=1.0,
                                      future_outline=True, title=_("softmax without the mask"), height=340,
                                      words=words),
                    key="mask_ex_unmasked", filename=f"example_no_mask_{name}")
    if m < 2:
        st.caption(_("Type a longer text to see a row with both a past and a future."))
        return
    r = most_leaking_row(ex.leak)
    steps = softmax_steps(ex.scores[r], ex_allowed[r])
    later = m - 1 - r
    st.markdown(
        _("**Row {row}** (query {token}) step by step:").format(row=r, token=escape_markdown(token_label(ex_tokens, r)))
        + "\n\n"
        + "1. " + _("scores: {vector}").format(vector=f"`{_vector(steps.scores)}`") + "\n"
        + "2. " + _("add the mask: {vector}").format(vector=f"`{_vector(steps.masked)}`") + "\n"
        + "3. " + _("exp(score − max): {vector} (exp(−∞) = 0)").format(vector=f"`{_vector(steps.exp)}`") + "\n"
        + "4. " + _("divide by their sum {total}: {vector}, which sums to 1").format(
            total=f"{steps.total:.2f}", vector=f"`{_vector(steps.probs)}`") + "\n\n"
        + ngettext("Without the mask the same row is {vector}: {share} of it would go to the {n} later token.",
                   "Without the mask the same row is {vector}: {share} of it would go to the {n} later tokens.",
                   later).format(vector=f"`{_vector(ex.unmasked[r])}`", share=f"{ex.leak[r]:.0%}", n=later))
    st.caption(_("The worked example shows exact values: the attention-sink switch does not apply here."))


def why_expander() -> None:
    with st.expander(_("Why must a decoder not look ahead?"), expanded=False):
        st.markdown("\n".join("- " + line for line in (
            _("**Training is parallel.** One pass over a text trains the model to predict *every* next token at once: "
              "position 0 predicts token 1, position 1 predicts token 2, and so on."),
            _("**Looking ahead would be copying the answer.** Without the mask, position i could simply attend to "
              "token i + 1, the very token it has to predict. Training would reward copying, not understanding."),
            _("**At generation time the future does not exist.** The model writes one token at a time; when it "
              "predicts token i + 1, tokens i + 2, i + 3, … have not been written yet. The mask makes training match "
              "that situation exactly."),
            _("**Masking before the softmax, not after.** Adding −∞ to a score makes exp(−∞) = 0, so the remaining "
              "weights still sum to 1. Zeroing probabilities after the softmax would leave rows that no longer sum "
              "to 1."))))

