"""Causal mask: the selected head's scores before the mask, the mask, the masked scores, the softmax, and the same
softmax without the mask (the future leak), on the user's own text; then a 4-token worked example with numbers. The
comparison view: a head of a model with the mask beside one without, on the same text (a decoder beside a BERT, a
BERT beside a decoder, a T5's decoder beside its encoder)."""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.mask
from app_core import demo_models, families
from app_core import models_folder as models
from app_core import schemas as S
from app_core.derived.mask_compare import MaskSide, mask_side, shown_share
from app_pages.frame import controls, default_model, session, shell
from app_pages.frame.i18n import N_, _, ngettext, translated
from app_pages.frame.widgets import SharedBuilders, escape_markdown, show_figure, token_label, token_legend
from model.analysis.head_stats import sink_hidden_view
from model.errors import ModelLoadError
from model.maths.masking import masked_views, most_leaking_row, softmax_steps

vm = SharedBuilders(viz.mask)

N = S.CAUSAL_MASK.by_name("n")
SIDE = S.CAUSAL_MASK.by_name("side")
VIEW = S.CAUSAL_MASK.by_name("view")
ENCODER, OTHER_LAYER, OTHER_HEAD = (S.CAUSAL_MASK.by_name(n) for n in ("enc", "olayer", "ohead"))
ENCODER_PICK = "w_mask_encoder"     # the encoder box's own key: it copies into the enc setting
COMPARE_HEIGHT = 380                # two squares side by side, under the controls, on a 768 px high first screen
TRAINED_TO = {   # what each side's family is trained to do: one sentence under its matrix
    "decoder": N_("**{model}** is a decoder-only model, trained to predict the next token: row i may look only at "
                  "tokens 0…i (grey cells are masked), or it could simply read the token it has to predict."),
    "encoder": N_("**{model}** is an encoder, trained to fill in masked tokens ([MASK]): every row looks at the whole "
                  "text, left and right, to guess a hidden token from both sides. No cell is masked."),
    "t5-decoder": N_("**{model}**'s decoder is trained to write its target's next token, so it is causal like a "
                     "decoder-only model (here it reads your text as its target)."),
    "t5-encoder": N_("**{model}**'s encoder reads the whole source at once, with no mask, for its decoder to look "
                     "at."),
}
EXAMPLE_TOKENS = 4
FULL_HEIGHT = 470          # one matrix per row: a ~340 px square on a 1024 px wide screen
PAIR_HEIGHT = 360          # two per row: equal squares, no colour bars (hover for values)


def _vector(values) -> str:
    return "[" + ", ".join("−∞" if np.isneginf(v) else f"{v:.2f}".replace("-", "−") for v in values) + "]"


def pair(side_by_side: bool):
    """Two places for two figures: columns side by side, or one under the other."""
    return st.columns(2, gap="small") if side_by_side else (st.container(), st.container())




def render() -> None:
    """The page: the four steps on the user's text, the future leak without the mask, a worked example; or the
    comparison of a model with the mask and one without."""
    family = families.family_of(session.get_model())
    shell.header(_("Causal mask"), _("Before the softmax every future key (j > i) gets a score of −∞, so its weight "
                                     "comes out exactly 0. These are the real numbers of the layer and head chosen in "
                                     "the sidebar.") if family == families.DECODER else
                 _("A decoder may not look ahead: before its softmax every future key gets a score of −∞. An encoder "
                   "has no mask. Here both read the same text."))
    trace = shell.current_trace()
    if trace is None:
        shell.stop()
    views = {v: label for v, label in S.MASK_VIEWS.items() if families.supports("causal-mask", v, family)}
    view, tab = controls.view_tabs(VIEW, views)
    with tab:
        if view == "compare":
            compare_view(trace.text, family)
        else:
            steps_view(trace)


def steps_view(trace) -> None:
    """The four steps on the session's decoder, the future leak, the worked example."""
    ss = st.session_state
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



# ------------------------------------------------------------------------------------------------ comparison
def encoder_options() -> list[models.ModelInfo]:
    """The BERT-family models offered (the models folder's, else the built-in tiny one)."""
    return [info for info in models.offered() if info.ok and info.family == families.ENCODER]


def _loaded(info: models.ModelInfo | None):
    """A model from the server's pool (None: the built-in model), with a spinner while it loads."""
    with st.spinner(_("Loading {name}…").format(name=info.name if info else _("the built-in model")), show_time=True):
        return session.load_shared_model(info)


def decoder_partner():
    """A decoder to compare with the session's BERT: the server's default model where it is a decoder, else the
    built-in one."""
    info = default_model.ready_info()
    return _loaded(info if info is not None and info.family == families.DECODER else None)


def encoder_partner():
    """The BERT to compare with the session's decoder (the enc setting's, else the first offered), with its picker
    when there are several; None (after saying so) when none is offered."""
    ss = st.session_state
    options = encoder_options()
    if not options:
        st.info(_("This server has no BERT-family model to compare with. Add one to the models folder."),
                icon=":material/info:")
        return None, None
    names = [info.name for info in options]
    picked = ss.get(ENCODER.key) if ss.get(ENCODER.key) in names else names[0]
    ss[ENCODER.key] = None if picked == names[0] else picked
    info = options[names.index(picked)]
    return _loaded(info), info


def partner_sliders(side_name: str, n_layers: int, n_heads: int, row) -> None:
    """The compared model's own layer and head (its counts), in the controls' row."""
    ss = st.session_state
    for param, n, label in ((OTHER_LAYER, n_layers, _("{side}: layer")), (OTHER_HEAD, n_heads, _("{side}: head"))):
        ss[param.key] = min(int(ss.get(param.key) or 0), n - 1)
        if n > 1:
            row.slider(label.format(side=side_name), 0, n - 1, key=param.key, width=150, **controls.PERSIST)


def compare_view(text: str, family: str) -> None:
    """A head with the causal mask beside a head without, on the same text (module docstring)."""
    ss = st.session_state
    lm = session.get_model()
    ws = session.workspace(lm)
    own_layer, own_head = ss[S.LAYER.key], ss[S.HEAD.key]
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    T = min(shell.token_count(text), session.token_limit())
    if T >= 3:
        row.slider(_("Show the first N tokens"), 2, T, key=N.key, width=220, **controls.PERSIST,
                   help=_("Of the loaded model's tokens; the other model shows as many of its own."))
    n = int(ss[N.key] or T)
    demo = None
    try:
        if family == families.DECODER:
            options = encoder_options()
            if len(options) > 1:
                names = [info.name for info in options]
                ss[ENCODER_PICK] = ss.get(ENCODER.key) if ss.get(ENCODER.key) in names else names[0]
                row.selectbox(_("Encoder"), names, key=ENCODER_PICK, width=200, on_change=controls.follow_pick,
                              args=(ENCODER_PICK, ENCODER.key, names[0]),
                              format_func=lambda name: next(_(demo_models.label(i) or i.name) for i in options
                                                            if i.name == name))
            other, info = encoder_partner()
            if other is None:
                return
            demo = info
            ows = session.workspace(other)
            partner_sliders(_("Encoder"), other.config.n_layers, other.config.n_heads, row)
            left = mask_side(ws, text, own_layer, own_head, n)
            right = mask_side(ows, text, ss[OTHER_LAYER.key], ss[OTHER_HEAD.key], n)
            kinds = ("decoder", "encoder")
        elif family == families.ENCODER:
            other = decoder_partner()
            partner_sliders(_("Decoder"), other.config.n_layers, other.config.n_heads, row)
            left = mask_side(session.workspace(other), text, ss[OTHER_LAYER.key], ss[OTHER_HEAD.key], n)
            right = mask_side(ws, text, own_layer, own_head, n)
            kinds = ("decoder", "encoder")
        else:
            partner_sliders(_("Decoder"), lm.config.n_decoder_layers, lm.config.n_heads, row)
            left = mask_side(ws, text, ss[OTHER_LAYER.key], ss[OTHER_HEAD.key], n, t5_decoder=True)
            right = mask_side(ws, text, own_layer, own_head, n)
            kinds = ("t5-decoder", "t5-encoder")
    except (ModelLoadError, ValueError) as err:
        st.info(str(err), icon=":material/info:")
        return
    words = translated(vm.WORDS)
    for column, side, kind, title in zip(st.columns(2, gap="small"), (left, right), kinds,
                                         (_("With a mask"), _("Without a mask")), strict=True):
        with column:
            compare_figure(side, title, words, f"mask_compare_{'left' if side is left else 'right'}")
            st.caption(_(TRAINED_TO[kind]).format(model=escape_markdown(side.model)))
    notes = []
    if right.n_tokens > len(right.tokens):
        notes.append(_("Only the first {n} of the encoder's {total} tokens are shown: its rows also look at the "
                       "later ones, so a row shown sums to less than 1 (here {low} at least).").format(
            n=len(right.tokens), total=right.n_tokens, low=f"{shown_share(right).min():.0%}"))
    if demo is not None and demo_models.description(demo):
        notes.append(_(demo_models.description(demo)))
    notes.append(_("The two models split the text into tokens their own way. Hover a cell for its weight."))
    st.caption(" ".join(notes))
    token_legend([*left.tokens, *right.tokens])


def compare_figure(side: MaskSide, title: str, words, key: str) -> None:
    """One side's pattern: a square matrix, masked cells grey (a causal side), no colour bar (hover for values)."""
    n = len(side.tokens)
    allowed = np.tri(n, dtype=bool) if side.causal else None
    heading = "{title}<br><sup>{detail}</sup>".format(title=title, detail=_(
        "{model} · layer {layer}, head {head}").format(model=side.model, layer=side.layer, head=side.head))
    show_figure(vm.matrix_heatmap(side.pattern, side.tokens, kind="probs", allowed=allowed, title=heading,
                                  height=COMPARE_HEIGHT, show_scale=False, show_values=False, words=words),
                key=key, filename=f"{'with' if side.causal else 'without'}_mask_L{side.layer}_H{side.head}")
