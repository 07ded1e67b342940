"""Attention: one head, all heads of a layer, the whole model, one query token, the next-token prediction, and for an
encoder-decoder (T5) its cross-attention (target x source) beside its two self-attentions. An encoder's (BERT's, a
T5's encoder's) patterns have no mask: every cell is a weight."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from app_core import families
from app_core import schemas as S
from app_core.derived import seq2seq
from app_core.derived.heads import head_matrix_csv, head_statistics, thumbnails
from app_pages.frame import controls, session, shell
from app_pages.frame.i18n import N_, _, translated
from app_pages.frame.widgets import (
    escape_markdown,
    shared_figure,
    show_figure,
    token_label,
    token_legend,
)
from model.analysis.head_stats import STATISTICS, has_repeats, sink_hidden_view, top_predictions
from viz import attention as va
from viz import seq2seq as vs
from viz.labels import plotly_escape

VIEW = S.ATTENTION.by_name("view")
OVERVIEW = S.ATTENTION.by_name("color")
STACK, TARGET = S.ATTENTION.by_name("stack"), S.ATTENTION.by_name("target")
TARGET_BOX = "w_cross_target"      # the target box's own key: it copies into the target setting ("" -> None)
CROSS_HEIGHT = 470                 # the cross-attention matrix: its top and most of it on a 768 px high screen
# Each head statistic (model.analysis.head_stats.STATISTICS): (name, short name for narrow headers, meaning)
STATS = {
    "prev_token": (N_("previous-token score"), N_("prev-token"),
                   N_("mean attention from each token to the token right before it (1 = a pure previous-token "
                      "head)")),
    "induction": (N_("induction score"), N_("induction"),
                  N_("mean attention from a repeated token to the token that followed its earlier occurrence (needs "
                     "repeats in the text)")),
    "sink": (N_("first-token (sink) score"), N_("sink (token 0)"),
             N_("mean attention on position 0; always measured on the raw pattern")),
    "self": (N_("self (diagonal) score"), N_("self"), N_("mean attention of each token to itself")),
    "entropy": (N_("entropy (bits)"), N_("entropy (bits)"),
                N_("how spread out each row is: 0 bits = all weight on one key, log2(i+1) = uniform over the row")),
}
assert set(STATS) == set(STATISTICS)
OVERVIEW_LABELS = {"thumbs": N_("pattern thumbnails"), **{k: v[0] for k, v in STATS.items()}}
SINK_HINT_AT = 0.5      # suggest the switch when a head puts more than this share on position 0
HEATMAP_HEIGHT = 560    # the one-head matrix: its top and most of it inside a 768 px high first screen
SIDE_PANEL_PX = 300     # beside the matrix when the page is wide enough (presenter mode, 1280 px), else under it



@dataclass(frozen=True)
class PageRun:
    """What every view of one run of the page reads: the trace, the selection, the sink switch, the statistics."""
    ws: object              # app_core.workspace.Workspace: the model and what is computed with it
    trace: object
    layer: int
    head: int
    query: int
    hide_sink: bool
    stats: dict
    words: object
    causal: bool = True     # a decoder's pattern (keys after the query masked); False: an encoder's

def titled(r: PageRun, title: str) -> str:
    """A figure title, marked when the sink is hidden."""
    return _("{title} (sink hidden)").format(title=title) if r.hide_sink else title


def stat_name(kind: str) -> str:
    return _(STATS[kind][0])


def stat_short(kind: str) -> str:
    return _(STATS[kind][1])


def stat_help(kind: str) -> str:
    return _(STATS[kind][2])


def stat_value(value: float) -> str:
    return _("n/a") if np.isnan(value) else f"{value:.2f}"


def shown(r: PageRun, layer_index: int, head_index: int | slice = slice(None)) -> np.ndarray:
    """The pattern(s) as shown: raw, or with the sink hidden (key 0 and rows 0-1 left out, rows renormalized)."""
    pattern = r.trace.attention[layer_index, head_index]
    return sink_hidden_view(pattern) if r.hide_sink else np.asarray(pattern, dtype=np.float32)


def sink_hint(r: PageRun, share: float) -> None:
    if not r.hide_sink and share > SINK_HINT_AT:
        st.caption(":material/visibility_off: " + _(
            "This head puts {share} of its attention on the first token (the attention sink), so the rest looks "
            "dark: switch on **Hide attention sink** to see where the remaining attention goes.").format(
            share=f"{share:.0%}"))


def download_csv(r: PageRun) -> None:
    layer, head, hide_sink = r.layer, r.head, r.hide_sink
    st.download_button(
        _("Download this matrix (CSV)"), data=partial(head_matrix_csv, r.ws, r.trace.text, layer, head, hide_sink),
        mime="text/csv",
        file_name=f"attention_L{layer}_H{head}{'_nosink' if hide_sink else ''}.csv", key="w_download_csv",
        on_click="ignore", icon=":material/download:",
        help=_("The matrix shown: rows = queries, columns = keys, labelled '<position> <token>'; masked and hidden "
               "cells are empty."))


def scores_line(r: PageRun, layer_index: int, head_index: int) -> str:
    parts = []
    for k in ("prev_token", "sink", "entropy", "induction"):
        parts.append(f"{stat_short(k)} **{stat_value(r.stats[k][layer_index, head_index])}**")
    return " · ".join(parts)


HEADER = {   # the page's line of explanation, by family
    families.DECODER: N_("Each head decides how much each token (a query, one row) looks at each earlier token (the "
                         "keys, the columns). Rows sum to 1; grey cells are future tokens, which the causal mask "
                         "forbids."),
    families.ENCODER: N_("Each head decides how much each token (a query, one row) looks at every token of the text "
                         "(the keys, the columns), before and after it: an encoder has no causal mask. Rows sum to "
                         "1."),
    families.SEQ2SEQ: N_("A T5's encoder reads your text with no mask (these views); its decoder writes a target and "
                         "looks back at the source through cross-attention (the Cross-attention tab). Rows sum to 1."),
}


def tab_labels(family: str) -> dict[str, str]:
    """The views this family's model shows as tabs (a view it cannot show is reached by a link only, with a note)."""
    return {slug: label for slug, label in S.ATTENTION_VIEWS.items() if families.supports("attention", slug, family)}


def render() -> None:
    """The page: the open view (one head, a layer, the whole model, one query, the next token, a T5's
    cross-attention) of the trace."""
    ss = st.session_state
    ws = session.workspace()
    family = families.family_of(ws.lm)
    shell.header(_("Attention"), _(HEADER[family]))
    trace = shell.current_trace()
    if trace is None:
        shell.stop()
    causal = family == families.DECODER
    hide_sink = bool(ss[S.SINK.key]) and causal
    r = PageRun(ws=ws, trace=trace, layer=ss[S.LAYER.key], head=ss[S.HEAD.key], query=ss[S.QUERY.key],
                hide_sink=hide_sink, stats=ws.compute(head_statistics, trace.text, hide_sink),
                words=translated(va.WORDS), causal=causal)
    view, tab = controls.view_tabs(VIEW, tab_labels(family))
    with tab:
        if ss[S.SINK.key] and not causal and view != "cross":
            st.caption(":material/info: " + _("The sink switch hides a decoder's first token; this model reads in both "
                                              "directions, so it is not applied here."))
        {"head": head_view, "layer": layer_view, "model": model_view, "query": query_view, "next": next_view,
         "cross": cross_view}[view](r)


def head_view(r: PageRun) -> None:
    ss = st.session_state
    layer, head, tokens = r.layer, r.head, r.trace.tokens
    st.toggle(_("Stretch colours"), key="attention_stretch", **controls.PERSIST,
              help=_("Long texts spread attention thin: most weights are near 1/T. The colour scale then ends at "
                     "the 99th percentile of the weights shown, so small ones become visible (the largest few "
                     "cells saturate)."))
    row = st.container(horizontal=True, gap="medium")     # the side panel wraps under the chart when narrow
    fig = shared_figure(va.head_heatmap, shown(r, layer, head), tokens, query=r.query,
                        stretch=ss["attention_stretch"], sink_hidden=r.hide_sink, height=HEATMAP_HEIGHT, words=r.words,
                        causal=r.causal,
                        title=titled(r, _("Layer {layer}, head {head}").format(layer=layer, head=head)))
    with row:
        show_figure(fig, key="fig_head", filename=f"attention_L{layer}_H{head}", width="content")
        side = st.container(width=SIDE_PANEL_PX)
    with side:
        st.markdown(scores_line(r, layer, head), help="; ".join(f"{stat_name(k)}: {stat_help(k)}" for k in STATS))
        sink_hint(r, float(r.stats["sink"][layer, head]))
        controls.query_picker(r.trace, label=_("Query token (its row is outlined in red)"))
        st.caption(_("Rows: query tokens (the ones looking); columns: key tokens (looked at). Dark = weight 0, "
                     "grey = a future token (masked), pale grey = hidden (hover for why). The camera icon saves "
                     "the figure as a PNG.") if r.hide_sink else
                   _("Rows: query tokens (the ones looking); columns: key tokens (looked at). Dark = weight 0, "
                     "grey = a future token (masked). The camera icon saves the figure as a PNG.") if r.causal else
                   _("Rows: query tokens (the ones looking); columns: key tokens (looked at), before and after the "
                     "query: no mask. Dark = weight 0. The camera icon saves the figure as a PNG."))
        token_legend(tokens)
        download_csv(r)


def layer_view(r: PageRun) -> None:
    ss = st.session_state
    cfg, layer = r.ws.lm.config, r.layer
    st.toggle(_("Stretch colours"), key="attention_stretch", **controls.PERSIST,
              help=_("Each head is drawn on its own scale from 0 to its largest weight; stretched, to its 99th "
                     "percentile, so faint structure shows on long texts."))
    fig = shared_figure(va.layer_grid, shown(r, layer), selected=r.head, stretch=ss["attention_stretch"],
                        sink_hidden=r.hide_sink, words=r.words, causal=r.causal,
                        title=titled(r, _("Layer {layer}: all {n} heads").format(layer=layer, n=cfg.n_heads)))
    show_figure(fig, key="fig_layer", filename=f"attention_L{layer}_all_heads")
    block = -(-r.trace.n_tokens // va.GRID_MAX_CELLS)
    st.caption(" ".join([_("Each head has its own colour scale (0 = dark, its largest weight = yellow).")] + (
        [_("Long text: each cell is the mean of a block of {block} x {block} tokens.").format(block=block)]
        if block > 1 else []) + [
        _("Heads {heads} share {n_kv} key/value heads: head h reads KV head h // {group}.").format(
            heads=", ".join(str(h) for h in range(cfg.n_heads)), n_kv=cfg.n_kv_heads, group=cfg.group_size)]))
    with st.container(horizontal=True, vertical_alignment="bottom"):
        controls.head_picker(cfg, label=_("Open a head"))
        st.button(_("Show this head large"), key="w_open_head", on_click=controls.show_view,
                  args=(VIEW.key, "head"), icon=":material/zoom_in:")


def model_view(r: PageRun) -> None:
    layer, head, stats, words = r.layer, r.head, r.stats, r.words
    kind = st.segmented_control(_("Colour each head by"), options=list(OVERVIEW_LABELS),
                                format_func={k: _(v) for k, v in OVERVIEW_LABELS.items()}.get, key=OVERVIEW.key,
                                required=True, **controls.PERSIST)
    if kind == "thumbs":
        tiles = r.ws.compute(thumbnails, r.trace.text, r.hide_sink)
        fig = shared_figure(va.thumbnail_overview, tiles, selected=(layer, head), words=words, causal=r.causal,
                            title=titled(r, _("Every head's pattern (each scaled to its own max)")))
    else:
        fig = shared_figure(va.stat_overview, stats[kind], label=stat_short(kind), selected=(layer, head),
                            zmin=0.0, zmax=None if kind == "entropy" else 1.0, words=words,
                            scale_title=_("bits") if kind == "entropy" else None,
                            title=titled(r, _("{statistic} of every head").format(statistic=stat_name(kind))))
    show_figure(fig, key="w_overview", filename=f"attention_overview_{kind}", selection_mode="points",
                on_select=partial(controls.pick_head_from_chart, "w_overview"))
    if kind == "thumbs":
        st.caption(_("Each thumbnail is one head (rows = queries, columns = keys), averaged over blocks of "
                     "tokens and scaled to its own maximum. Hover for the layer and head; click one to select "
                     "it."))
    else:
        st.caption(_("{statistic}: {meaning}. Hover a cell for its value; click it to select that head (red "
                     "outline).").format(statistic=stat_name(kind), meaning=stat_help(kind)))
    if kind == "induction" and not has_repeats(r.trace.token_ids):
        st.info(_("This text repeats no token, so there is nothing for an induction head to do: the scores are "
                  "blank. Load the example **{example}**.").format(example=_("Induction heads (repeated random "
                                                                              "words)")),
                icon=":material/repeat:")
    left, right = st.columns([3, 2], gap="medium")
    with left:
        fig = shared_figure(va.head_heatmap, shown(r, layer, head), r.trace.tokens, query=r.query, max_labels=20,
                            height=440, show_scale=False, sink_hidden=r.hide_sink, words=words, causal=r.causal,
                            title=_("Selected: layer {layer}, head {head}").format(layer=layer, head=head))
        show_figure(fig, key="fig_model_preview", filename=f"attention_L{layer}_H{head}")
    with right:
        st.markdown("**{}**".format(_("Layer {layer}, head {head}").format(layer=layer, head=head)))
        for k in STATS:
            st.markdown(f"{stat_short(k)}: **{stat_value(stats[k][layer, head])}**", help=stat_help(k))
        st.button(_("Show this head large"), key="w_open_head_model", on_click=controls.show_view,
                  args=(VIEW.key, "head"), icon=":material/zoom_in:")
    stats_table(r)


def stats_table(r: PageRun) -> None:
    """Every head's statistics in a sortable table; a selected row opens that head."""
    stats = r.stats
    st.markdown("**{}**".format(_("Which heads do what?")))
    order = np.argsort(-np.nan_to_num(stats["prev_token"], nan=-1).ravel(), kind="stable")
    layer_idx, head_idx = np.divmod(order, r.ws.lm.config.n_heads)
    listed = [k for k in STATS if k != "induction" or has_repeats(r.trace.token_ids)]
    table = pd.DataFrame({"layer": layer_idx, "head": head_idx,       # columns named in English, shown translated
                          **{STATS[k][0]: stats[k].ravel()[order] for k in listed}})
    st.session_state["_stats_table_order"] = list(zip(layer_idx.tolist(), head_idx.tolist(), strict=True))
    st.caption(" ".join(
        [_("Sorted by previous-token score: the top rows are the previous-token heads. Click a column header to "
           "sort by another score; select a row to open that head.")]
        + ([_("Scores use the renormalized patterns (sink hidden), except the sink score.")] if r.hide_sink else [])
        + ([] if "induction" in listed else [_("No induction score: this text repeats no token.")])))
    columns = {"layer": st.column_config.NumberColumn(_("layer"), format="%d", width=56),
               "head": st.column_config.NumberColumn(_("head"), format="%d", width=56),
               **{STATS[k][0]: st.column_config.NumberColumn(stat_short(k), format="%.2f", help=stat_help(k))
                  for k in listed}}
    st.dataframe(table, key="w_stats_table", hide_index=True, height=360, width="stretch",
                 on_select=partial(controls.pick_head_from_table, "w_stats_table", "_stats_table_order"),
                 selection_mode="single-row", column_config=columns)


def query_view(r: PageRun) -> None:
    layer, head, query, tokens = r.layer, r.head, r.query, r.trace.tokens
    controls.query_slider(r.trace)
    rows = shown(r, layer)[:, query, :]                                    # [H, T]
    fig = shared_figure(va.query_heads_heatmap, rows, tokens, query, selected=head, sink_hidden=r.hide_sink,
                        max_labels=32, words=r.words, causal=r.causal,
                        title=titled(r, _("Query #{query} '{token}', layer {layer}").format(
                            query=query, token=plotly_escape(tokens[query]), layer=layer)))
    show_figure(fig, key="fig_query", filename=f"attention_L{layer}_query{query}")
    if r.hide_sink and query < 2:
        st.caption(_("With the sink hidden, the first two tokens have nothing left to show: pick a later "
                     "query."))
    else:
        top = np.argsort(-np.nan_to_num(rows[head], nan=-1.0))[:5]
        looked = ", ".join(f"{escape_markdown(token_label(tokens, int(j)))} ({rows[head, j]:.0%})"
                           for j in top if rows[head, j] >= 0.005)
        st.caption((_("Each row is one head's attention from the query token over the tokens before it (it cannot "
                      "see later ones). Head {head} looks most at: {tokens}.") if r.causal else
                    _("Each row is one head's attention from the query token over every token of the text, before "
                      "and after it (no mask). Head {head} looks most at: {tokens}.")).format(head=head, tokens=looked))
    token_legend(tokens[: query + 1] if r.causal else tokens)


def next_view(r: PageRun) -> None:
    trace = r.trace
    ids, probs = top_predictions(trace.next_token_logits, k=10)
    labels = r.ws.lm.token_labels([int(i) for i in ids])
    fig = shared_figure(va.next_token_bars, labels, probs, words=r.words,
                        title=_("After '{token}': top 10 next tokens").format(token=plotly_escape(trace.tokens[-1])))
    show_figure(fig, key="fig_next", filename="next_token_top10")
    cut = [_("The text was cut to its first {n} tokens, so this predicts the token after #{last}, not after the "
             "end of your text.").format(n=trace.n_tokens, last=trace.n_tokens - 1)] if trace.truncated else []
    st.caption(" ".join([_("Softmax of the model's output logits after the last token (temperature 1). The whole "
                           "vocabulary has {vocab} tokens; these 10 hold {share} of the probability.").format(
        vocab=f"{r.ws.lm.config.vocab_size:,}", share=f"{probs.sum():.0%}")] + cut))
    token_legend(labels)



def cross_view(r: PageRun) -> None:
    """A T5's run of the text (the source) and a target: the cross-attention (each written token over the source),
    the decoder's causal self-attention or the encoder's, for the layer (cut to the stack's) and head."""
    ss, ws = st.session_state, r.ws
    ss[TARGET_BOX] = ss.get(TARGET.key) or ""
    with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
        st.selectbox(_("Attention"), list(S.CROSS_STACKS), format_func=lambda s: _(S.CROSS_STACKS[s]),
                     key=STACK.key, width=240, **controls.PERSIST,
                     help=_("Cross-attention: each target token over the source. Decoder self-attention: the target "
                            "over itself, causal. Encoder self-attention: the source over itself, no mask."))
        st.text_input(_("Target"), key=TARGET_BOX, max_chars=S.MAX_TARGET_CHARS, width=300,
                      on_change=controls.follow_pick, args=(TARGET_BOX, TARGET.key, ""),
                      placeholder=_("empty: what the model writes"),
                      help=_("The decoder's input after its start token. Empty: the target the model writes itself "
                             "(greedy), so the rows show where it looked to write each token."))
    target = ss.get(TARGET.key)
    try:
        run = (ws.compute(seq2seq.written_run, r.trace.text, share="traces") if target is None else
               ws.compute(seq2seq.seq2seq_run, r.trace.text, target, share="traces"))
    except ValueError as err:
        st.info(str(err), icon=":material/edit_note:")
        return
    stack = ss[STACK.key]
    m = seq2seq.stack_matrix(run, stack, r.layer, r.head, seq2seq.written_tokens(ws.lm, run))
    words = translated(vs.WORDS)
    axes = {"cross": (words.written_axis, words.source_axis), "decoder": (words.target_axis, words.target_key_axis),
            "encoder": (words.source_query_axis, words.source_axis)}[stack]
    title = _("{attention}: layer {layer}, head {head}").format(attention=_(S.CROSS_STACKS[stack]), layer=m.layer,
                                                                head=r.head)
    show_figure(shared_figure(vs.attention_heatmap, m.weights, m.row_tokens, m.column_tokens, row_title=axes[0],
                              column_title=axes[1], causal=m.causal, title=title, height=CROSS_HEIGHT, words=words),
                key="fig_cross", filename=f"{stack}_attention_L{m.layer}_H{r.head}")
    said = {"cross": _("Row i is the decoder position that writes target token i; its columns are the source tokens "
                       "it looked at to write it. A model that copies, reverses or translates word by word draws "
                       "the alignment as a diagonal line (reversed: an anti-diagonal)."),
            "decoder": _("The decoder reads its own target left to right: its first token is the start token, and "
                         "grey cells are later target tokens, which the causal mask forbids (as in a decoder-only "
                         "model)."),
            "encoder": _("The encoder reads the whole source at once: every token sees every token, no mask (as in "
                         "BERT).")}[stack]
    cut = ([_("The decoder has {n} layers: showing its last.").format(n=m.n_layers)]
           if stack != "encoder" and r.layer >= m.n_layers else [])
    written = [_("No target typed: the target is what the model writes for this source: {text}").format(
        text=f"`{ws.lm.decode(run.target_ids[1:]) or '∅'}`")] if target is None else []
    st.caption(" ".join([said, *cut, *written]))
    token_legend([*m.row_tokens, *m.column_tokens])
