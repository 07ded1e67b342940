"""Circuits: what every head of the loaded model does (head roles on a probe), which activations carry an answer from
one text into another (activation patching on a minimal pair), and which input tokens the next prediction depends
on (occlusion, gradient x input) beside what a head attends to. The maths: model/analysis/head_roles.py,
patching.py, input_attribution.py; the figures: viz/circuits.py and viz/attention.py's overview."""
from __future__ import annotations

import io
from functools import partial

import numpy as np
import streamlit as st

import viz.attention
import viz.circuits
from app_core import schemas as S
from app_core.circuit_pairs import PAIRS
from app_core.derived import of_model
from app_core.derived.circuits import pair_patching
from app_pages import navigation
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import N_, _, translated
from app_pages.frame.widgets import SharedBuilders, show_figure, token_legend
from model.analysis.head_roles import PROBE_TOKENS
from model.analysis.head_stats import top_predictions
from model.analysis.input_attribution import MAX_ATTRIBUTION_TOKENS
from model.analysis.patching import MAX_PATCHING_TOKENS
from viz.labels import plotly_escape, shorten

va = SharedBuilders(viz.attention)
vc = SharedBuilders(viz.circuits)

VIEW, ROLE, CLEAN, CORRUPT, ANSWER, FOIL, KIND, TARGET = (
    S.CIRCUITS.by_name(n) for n in ("view", "role", "a", "b", "answer", "foil", "kind", "target"))
TARGET_PICK = "circ_target_pick"
ROLE_NAMES = {"previous_token": N_("previous-token"), "induction": N_("induction"),
              "duplicate_token": N_("duplicate-token"), "sink": N_("sink (token 0)")}
ROLE_MEANINGS = {
    "previous_token": N_("mean attention from each token to the one right before it"),
    "induction": N_("mean attention from a repeated token to the token that followed its earlier occurrence"),
    "duplicate_token": N_("mean attention from a repeated token to its earlier occurrences"),
    "sink": N_("mean attention on the first token"),
}
IMAGE_KEY = "w_circ_image"    # how the charts' camera button saves them (not a setting: what is shown stays the same)
IMAGES = {"projector": (N_("PNG, projector size (1024 × 768)"), dict(format="png", width=1024, height=768, scale=1)),
          "print": (N_("PNG, print size (4800 × 3000)"), dict(format="png", width=1600, height=1000, scale=3)),
          "svg": (N_("SVG (vector, 1024 × 768)"), dict(format="svg", width=1024, height=768, scale=1))}
KIND_NAMES = {"resid": N_("stream"), "head": N_("head outputs")}


PATCHING_HEIGHT = 340   # px: the patching map below the pair's two rows of inputs, on a 1024 x 768 first screen



def use_pair(index: int) -> None:
    """on_click: the example pair's texts, answer and foil fill the pair's settings."""
    pair = PAIRS[index]
    for name, value in (("a", pair.clean), ("b", pair.corrupt), ("answer", pair.answer), ("foil", pair.foil)):
        st.session_state[S.CIRCUITS.by_name(name).key] = value

def labels(names: dict[str, str]):
    """A widget's format_func: each option's name translated now (AppTest calls it outside the script run)."""
    return {key: _(name) for key, name in names.items()}.get


def chart(fig, key: str, filename: str, **kwargs) -> None:
    """show_figure with the camera button saving in the chosen format and size."""
    image = IMAGES[st.session_state.get(IMAGE_KEY) or "projector"][1]
    show_figure(fig, key=key, filename=filename, image=image, **kwargs)


def downloads(name: str, table: np.ndarray, header: str, code: str) -> None:
    """CSV and .npy of the data behind a view, and the lines of this project's API that compute it."""
    csv = io.StringIO()
    np.savetxt(csv, np.atleast_2d(table), delimiter=",", fmt="%.6g", header=header, comments="")
    npy = io.BytesIO()
    np.save(npy, table)
    with st.container(horizontal=True, vertical_alignment="bottom"):
        st.selectbox(_("Charts: the camera button saves"), list(IMAGES), key=IMAGE_KEY, width=280,
                     format_func=labels({k: label for k, (label, _options) in IMAGES.items()}))
        st.download_button(_("Data (CSV)"), csv.getvalue(), f"{name}.csv", "text/csv", icon=":material/download:",
                           key=f"csv_{name}")
        st.download_button(_("Data (.npy)"), npy.getvalue(), f"{name}.npy", "application/octet-stream",
                           icon=":material/download:", key=f"npy_{name}")
    with st.expander(_("The code behind this view")):
        st.code("from model import load_model\n\nlm = load_model()\n" + code, language="python")


def roles_view(lm) -> None:
    ss = st.session_state
    cfg = lm.config
    scores = session.workspace(lm).compute(of_model, "head_role_scores")
    role = st.segmented_control(_("Role"), options=list(ROLE_NAMES), format_func=labels(ROLE_NAMES),
                                key=ROLE.key, required=True, **controls.PERSIST)
    layer, head = ss[S.LAYER.key], ss[S.HEAD.key]
    fig = va.stat_overview(scores[role], label=_(ROLE_NAMES[role]), selected=(layer, head), zmin=0.0, zmax=1.0,
                           words=translated(va.WORDS),
                           title=_("{role} score of every head").format(role=_(ROLE_NAMES[role])))
    chart(fig, key="w_roles", filename=f"head_roles_{role}", selection_mode="points",
          on_select=partial(controls.pick_head_from_chart, "w_roles"))
    order = np.argsort(-scores[role].ravel())[:3]
    strongest = ", ".join(f"L{i // cfg.n_heads} H{i % cfg.n_heads} ({scores[role].ravel()[i]:.2f})" for i in order)
    st.caption(_("{role}: {meaning}, measured once for this model on a probe of {n} random tokens written twice "
                 "(the second half can be predicted by copying). Strongest: {strongest}. Click a head to select "
                 "it.").format(role=_(ROLE_NAMES[role]), meaning=_(ROLE_MEANINGS[role]), n=PROBE_TOKENS,
                               strongest=strongest))
    if st.button(_("Open layer {layer}, head {head} on the Attention page").format(layer=layer, head=head),
                 icon=":material/grid_on:", key="w_roles_open"):
        ss["attention_view"] = "head"
        navigation.switch_to("attention")
    downloads(f"head_roles_{role}", scores[role], ",".join(f"head {h}" for h in range(cfg.n_heads)),
              "scores = lm.head_role_scores()       # {role: [layers, heads]} on the standard probe\n"
              f"scores[{role!r}]")


def pair_inputs(lm) -> tuple[str, str, str, str, str] | None:
    """The pair's widgets; (clean, corrupt, answer, foil, kind), or None (with the reason shown) when it cannot run."""
    ss = st.session_state
    left, right = st.columns(2, gap="small")
    left.text_area(_("Text A (clean)"), key=CLEAN.key, height=68, max_chars=S.MAX_PAIR_CHARS, **controls.PERSIST)
    right.text_area(_("Text B (corrupt)"), key=CORRUPT.key, height=68, max_chars=S.MAX_PAIR_CHARS,
                    **controls.PERSIST)
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):    # one row at 1024 px
        with st.popover(_("Examples"), icon=":material/list:"):
            for i, pair in enumerate(PAIRS):
                st.button(_(pair.title), key=f"w_pair_{i}", on_click=use_pair, args=(i,))
        st.text_input(_("Answer"), key=ANSWER.key, width=100, **controls.PERSIST,
                      help=_("One token: the token text A should lead to; a leading space usually belongs to the "
                             "word."))
        st.text_input(_("Foil"), key=FOIL.key, width=100, **controls.PERSIST,
                      help=_("One token: the token text B leads to instead."))
        kind = st.segmented_control(_("Patch"), options=list(KIND_NAMES), format_func=labels(KIND_NAMES),
                                    key=KIND.key, required=True, **controls.PERSIST,
                                    help=_("The stream: the residual stream at one layer and token (layer × "
                                           "token); heads: one head's output at every token (layer × head)."))
    clean, corrupt, answer, foil = (ss[p.key] or "" for p in (CLEAN, CORRUPT, ANSWER, FOIL))
    if not clean.strip() or not corrupt.strip():
        st.info(_("Type both texts."))
        return None
    n_clean, n_corrupt = len(lm.encode(clean)), len(lm.encode(corrupt))
    if n_clean != n_corrupt:
        st.warning(_("Text A is {a} tokens and text B {b}: patching copies token p of A into token p of B, so both "
                     "need the same number of tokens. Change words for words of the same token count.").format(
            a=n_clean, b=n_corrupt))
        return None
    if n_clean > MAX_PATCHING_TOKENS:
        st.warning(_("The texts are {n} tokens; patching here takes at most {limit}.").format(
            n=n_clean, limit=MAX_PATCHING_TOKENS))
        return None
    prefix = len(lm.tokenizer.prefix_ids)
    for label, word in ((_("The answer"), answer), (_("The foil"), foil)):
        pieces = lm.encode(word)[prefix:]
        if len(pieces) != 1:
            st.warning(_("{what} {word} is {n} tokens for this model ({pieces}): give one token, e.g. its first "
                         "piece.").format(what=label, word=f"‘{word}’", n=len(pieces),
                                          pieces=" | ".join(lm.token_strings(pieces))))
            return None
    return clean, corrupt, answer, foil, kind


def patching_view(lm) -> None:
    picked = pair_inputs(lm)
    if picked is None:
        return
    clean, corrupt, answer, foil, kind = picked
    ws = session.workspace(lm)
    with st.spinner(_("Patching every layer…"), show_time=True):
        patched = ws.compute(pair_patching, clean, corrupt, answer, foil, kind)
    if patched.problem == "same token":
        st.warning(_("The answer and the foil are the same token."))
        return
    if patched.problem == "same gap":
        st.warning(_("Both texts give the same logit difference: there is nothing for patching to restore."))
        return
    traces = [ws.trace(t) for t in (clean, corrupt)]
    effects, gaps, tokens = patched.effects, patched.gaps, traces[1].tokens
    if kind == "resid":
        fig = vc.patching_heatmap(effects, tokens, words=translated(vc.WORDS), height=PATCHING_HEIGHT,
                                  title=_("Restored by the stream of text A at (layer, token)"))
        chart(fig, key="w_patch_resid", filename="patching_resid")
        token_legend(tokens)
    else:
        fig = va.stat_overview(effects, label=_("restored"), signed=True, words=translated(va.WORDS),
                               title=_("Restored by one head's output from text A"))
        chart(fig, key="w_patch_head", filename="patching_head")
    st.markdown(_("logit({answer}) − logit({foil}): **{a}** after text A, **{b}** after text B. Each cell: the share "
                  "of that gap restored when one activation of A replaces B's (1 = all of it).").format(
        answer=f"`{answer}`", foil=f"`{foil}`", a=f"{gaps[0]:+.2f}", b=f"{gaps[1]:+.2f}"))
    st.caption(_("Red: copying that activation from A moves B's prediction towards {answer}; blue: away from it. "
                 "Positions before the first differing token are identical in both runs (the model is causal), so "
                 "they restore nothing.").format(answer=f"`{answer}`"))
    columns = st.columns(2, gap="small")
    for side, where, trace, name in zip("ab", columns, traces, (_("After text A"), _("After text B")), strict=True):
        top_ids, probs = top_predictions(trace.next_token_logits, 5)
        labels = [plotly_escape(t) for t in lm.token_labels([int(i) for i in top_ids])]
        with where:
            chart(va.next_token_bars(labels, probs, title=name, words=translated(va.WORDS)),
                  key=f"w_next_{side}", filename=f"next_token_{side}")
    chart(va.stat_overview(patched.attention_difference, label=_("difference"), zmin=0.0, words=translated(va.WORDS),
                           title=_("How differently each head attends in A and B")),
          key="w_pair_attention", filename="attention_difference")
    st.caption(_("For each head: half the summed absolute difference of its attention weights in A and B (0 = the same "
                 "weights, 1 = no key in common), averaged over the positions from the first differing token on. A "
                 "head that attends differently need not matter: compare with the patching map above."))
    header = ",".join(tokens if kind == "resid" else [f"head {h}" for h in range(lm.config.n_heads)])
    downloads(f"patching_{kind}", effects, header.replace("\n", " "),
              f"effects = lm.activation_patching({clean!r},\n                                 {corrupt!r},\n"
              f"                                 {answer!r}, {foil!r}, kind={kind!r})   # [layers, "
              f"{'T' if kind == 'resid' else 'heads'}]")


def attribution_view(lm) -> None:
    ss = st.session_state
    trace = shell.current_trace()
    if trace is None:
        return
    if trace.n_tokens > MAX_ATTRIBUTION_TOKENS:
        st.info(_("The text is {n} tokens; attribution here takes at most {limit}. Type a shorter text.").format(
            n=trace.n_tokens, limit=MAX_ATTRIBUTION_TOKENS))
        return
    top_ids, probs = top_predictions(trace.next_token_logits, 10)
    top_ids = [int(i) for i in top_ids]
    target, names = controls.target_picker(lm, TARGET, TARGET_PICK, top_ids, _("Explain the prediction of"),
                                           help=_("The next token whose probability is explained."))
    layer, head = ss[S.LAYER.key], ss[S.HEAD.key]
    ws = session.workspace(lm)
    with st.spinner(_("Occluding every token…"), show_time=True):
        occluded = ws.compute(of_model, "occlusion", list(trace.token_ids), target)
        gradients = ws.compute(of_model, "gradient_x_input", list(trace.token_ids), target)
    attention = np.asarray(trace.attention[layer, head, -1], dtype=np.float64)   # [T] the last token's row
    rows = {_("occlusion: change in log p"): occluded, _("gradient x input"): gradients,
            _("attention of layer {layer}, head {head} from the last token").format(layer=layer, head=head): attention}
    token = plotly_escape(shorten(names[target], 16))
    fig = vc.attribution_rows(trace.tokens, rows, words=translated(vc.WORDS),
                              title=_("What the prediction of ‘{token}’ depends on").format(token=token))
    chart(fig, key="w_attribution", filename=f"attribution_{target}")
    token_legend(trace.tokens)
    st.caption(_("Occlusion: each token in turn replaced by a space, the change in the log-probability of the "
                 "prediction (below 0: the token supported it). Gradient x input: the first-order estimate of the "
                 "same, from one backward pass. The third row is where one head looks. **Attention is not "
                 "explanation**: a head can look hard at a token the prediction does not depend on, and the "
                 "tokens that matter may get little attention from any single head."))
    table = np.stack([occluded, gradients, attention])                           # [3, T]
    downloads(f"attribution_{target}", table.T, "occlusion,gradient_x_input,attention",
              f"ids = lm.encode({trace.text!r})\n"
              f"occlusion = lm.occlusion(ids, target={target})          # [T]\n"
              f"gradients = lm.gradient_x_input(ids, target={target})   # [T]\n"
              f"attention = lm.run_ids(ids).attention[{layer}, {head}, -1]   # [T]")


def render() -> None:
    """The page: the open view (head roles, activation patching, input attribution) on the loaded model."""
    shell.header(_("Circuits"), _("Which heads do what, which activations carry an answer from one text into another, "
                                  "and which tokens a prediction depends on: the tools of interpretability research, "
                                  "on the loaded model."))
    model = session.get_model()
    view, tab = controls.view_tabs(VIEW, S.CIRCUITS_VIEWS)
    with tab:
        {"roles": roles_view, "patching": patching_view, "attribution": attribution_view}[view](model)

