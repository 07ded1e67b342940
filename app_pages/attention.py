"""Attention: one head, all heads of a layer, the whole model, one query token, and the next-token prediction."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _state as state
from app_pages._widgets import (
    escape_markdown,
    picked_layer_head,
    selected_points,
    selected_rows,
    show_figure,
    token_label,
)
from model.head_stats import STATISTICS, has_repeats, top_predictions
from viz import attention as va

VIEWS = {"head": "One head", "layer": "All heads of a layer", "model": "Whole model",
         "query": "Query token", "next": "Next token"}
OVERVIEWS = {"thumbs": "pattern thumbnails", **{k: v[0] for k, v in STATISTICS.items()}}
SHORT_NAMES = {"prev_token": "prev-token", "induction": "induction", "sink": "sink (token 0)", "self": "self",
               "entropy": "entropy (bits)"}     # narrow table headers; the full names are in the tooltips
SINK_HINT_AT = 0.5      # suggest the switch when a head puts more than this share on position 0

st.title("Attention")
st.caption("Every head decides how much each token (a query, one row) looks at each earlier token (the keys, "
           "the columns). Each row sums to 1. Grey cells are future tokens: the causal mask forbids them.")

trace = state.current_trace()
if trace is None:
    st.stop()
lm = state.get_model()
cfg = lm.config
state.layer_head_controls()
sel = state.selection(trace)
tokens = trace.tokens
text = trace.text
stats = state.get_head_stats(text, state.DEFAULT_MAX_TOKENS, sel.hide_sink)
sink_note = " (sink hidden, rows renormalized)" if sel.hide_sink else ""


def _pattern(layer: int, head: int | slice = slice(None)) -> np.ndarray:
    """float32 pattern(s) of a layer with the sink switch applied."""
    return state.apply_sink(trace.attention[layer, head], sel.hide_sink)


def _sink_hint(share: float) -> None:
    if not sel.hide_sink and share > SINK_HINT_AT:
        st.info(f"This head puts {share:.0%} of its attention on the first token (the attention sink), so the "
                "rest looks dark. Turn on **Hide attention sink** in the sidebar to see where the remaining "
                "attention goes.", icon=":material/visibility_off:")


def _open_head() -> None:
    state.open_view("head", labels=VIEWS)


def _picked_on_overview() -> None:
    picked = picked_layer_head(selected_points(st.session_state.get("w_overview")))
    if picked is not None:
        state.set_layer_head(*picked)


def _picked_in_table() -> None:
    rows = selected_rows(st.session_state.get("w_stats_table"))
    order = st.session_state.get("_stats_table_order") or []
    if rows and rows[0] < len(order):
        state.set_layer_head(*order[rows[0]])


view, tabs = state.view_tabs(VIEWS, key="w_attention_view")
tab = dict(zip(VIEWS, tabs, strict=True))

if view == "head":
    with tab["head"]:
        p = _pattern(sel.layer, sel.head)
        ind = stats["induction"][sel.layer, sel.head]
        cols = st.columns(4)
        cols[0].metric("prev-token score", f"{stats['prev_token'][sel.layer, sel.head]:.2f}",
                       help=STATISTICS["prev_token"][1])
        cols[1].metric("sink score", f"{stats['sink'][sel.layer, sel.head]:.2f}", help=STATISTICS["sink"][1])
        cols[2].metric("entropy (bits)", f"{stats['entropy'][sel.layer, sel.head]:.2f}",
                       help=STATISTICS["entropy"][1])
        cols[3].metric("induction score", "n/a" if np.isnan(ind) else f"{ind:.2f}",
                       help=STATISTICS["induction"][1] + ("" if not np.isnan(ind) else ": this text has no repeats"))
        _sink_hint(float(stats["sink"][sel.layer, sel.head]))
        stretch = st.toggle("Stretch colours (scale ends at the 99th percentile)", key="w_stretch",
                            help="Long texts spread attention thin: most weights are near 1/T. This makes the "
                                 "small ones visible; the largest few cells saturate.")
        allowed = p[1:][np.tril(np.ones(p.shape, dtype=bool))[1:]]
        zmax = float(np.percentile(allowed, 99)) if stretch and allowed.size else None
        fig = va.head_heatmap(p, tokens, query=sel.query, zmax=zmax or None,
                              title=f"Layer {sel.layer}, head {sel.head}{sink_note}")
        show_figure(fig, key="fig_head", filename=f"attention_L{sel.layer}_H{sel.head}")
        st.caption("Rows: query tokens (the ones looking); columns: key tokens (looked at). Dark = weight 0, "
                   "light grey = masked future token. The red outline is the query token's row. The camera icon "
                   "above the figure saves it as a PNG.")
        st.download_button(
            "Download this matrix (CSV)", data=lambda p=p: va.matrix_csv(p, tokens), mime="text/csv",
            file_name=f"attention_L{sel.layer}_H{sel.head}{'_nosink' if sel.hide_sink else ''}.csv",
            key="w_download_csv", on_click="ignore", icon=":material/download:",
            help="The matrix shown: rows = queries, columns = keys, labelled '<position> <token>'; masked cells "
                 "are empty.")
        state.query_token_strip(trace, label="Query token (click one to outline its row)")

if view == "layer":
    with tab["layer"]:
        patterns = _pattern(sel.layer)
        fig = va.layer_grid(patterns, selected=sel.head, title=f"Layer {sel.layer}: all {cfg.n_heads} heads{sink_note}")
        show_figure(fig, key="fig_layer", filename=f"attention_L{sel.layer}_all_heads")
        pooled = trace.n_tokens > va.GRID_MAX_CELLS
        st.caption("One colour scale for all heads. " + (
            f"Long text: each cell is the mean of a block of {-(-trace.n_tokens // va.GRID_MAX_CELLS)} x "
            f"{-(-trace.n_tokens // va.GRID_MAX_CELLS)} tokens. " if pooled else "") +
            f"Heads {', '.join(str(h) for h in range(cfg.n_heads))} share "
            f"{cfg.n_kv_heads} key/value heads: head h reads KV head h // {cfg.group_size}.")
        state.head_picker(label="Open a head", key="w_head_pick")
        st.button("Show this head large", key="w_open_head", on_click=_open_head, icon=":material/zoom_in:")

if view == "model":
    with tab["model"]:
        st.session_state.setdefault("w_overview_kind", "prev_token")
        kind = st.segmented_control("Colour each head by", options=list(OVERVIEWS), format_func=OVERVIEWS.get,
                                    key="w_overview_kind", required=True) or "prev_token"
        # Full width, layers across and heads down: wide and short, readable at 1024 px.
        if kind == "thumbs":
            tiles = state.get_thumbnail_tiles(text, state.DEFAULT_MAX_TOKENS, sel.hide_sink)
            fig = va.thumbnail_overview(tiles, selected=(sel.layer, sel.head),
                                        title=f"Every head's pattern (each scaled to its own max){sink_note}")
        else:
            label = STATISTICS[kind][0]
            fig = va.stat_overview(stats[kind], label=label.split(" (")[0], selected=(sel.layer, sel.head),
                                   zmin=0.0, zmax=None if kind == "entropy" else 1.0,
                                   scale_title="bits" if kind == "entropy" else None,
                                   title=f"{label[0].upper() + label[1:]} of every head{sink_note}")
        show_figure(fig, key="w_overview", filename=f"attention_overview_{kind}", on_select=_picked_on_overview,
                    selection_mode="points")
        if kind == "thumbs":
            st.caption("Each thumbnail is one head (rows = queries, columns = keys), averaged over blocks of tokens "
                       "and scaled to its own maximum. Hover for the layer and head; click one to select it.")
        else:
            st.caption(f"{STATISTICS[kind][1][0].upper() + STATISTICS[kind][1][1:]}. Hover a cell for its value; "
                       "click it to select that head (red outline).")
        if kind == "induction" and not has_repeats(trace.token_ids):
            st.info("This text repeats no token, so there is nothing for an induction head to do: the scores "
                    "are blank. Load the example **Induction heads (repeated random words)**.",
                    icon=":material/repeat:")
        left, right = st.columns([3, 2], gap="medium")
        with left:
            p = _pattern(sel.layer, sel.head)
            fig = va.head_heatmap(p, tokens, query=sel.query, max_labels=20, height=440, show_scale=False,
                                  title=f"Selected: layer {sel.layer}, head {sel.head}")
            show_figure(fig, key="fig_model_preview", filename=f"attention_L{sel.layer}_H{sel.head}")
            st.caption("Dark = weight 0, bright = this head's largest weight; hover for the numbers.")
        with right:
            st.markdown(f"**Layer {sel.layer}, head {sel.head}**")
            for k in STATISTICS:
                value = stats[k][sel.layer, sel.head]
                st.markdown(f"{SHORT_NAMES[k]}: **{'n/a' if np.isnan(value) else f'{value:.2f}'}**",
                            help=STATISTICS[k][1])
            st.button("Show this head large", key="w_open_head_model", on_click=_open_head,
                      icon=":material/zoom_in:")
        st.subheader("Which heads do what?")
        order = np.argsort(-np.nan_to_num(stats["prev_token"], nan=-1).ravel(), kind="stable")
        layer_idx, head_idx = np.divmod(order, cfg.n_heads)
        shown = [k for k in STATISTICS if k != "induction" or has_repeats(trace.token_ids)]
        table = pd.DataFrame({"layer": layer_idx, "head": head_idx,
                              **{STATISTICS[k][0]: stats[k].ravel()[order] for k in shown}})
        st.session_state["_stats_table_order"] = list(zip(layer_idx.tolist(), head_idx.tolist(), strict=True))
        st.caption("Sorted by previous-token score: the top rows are the previous-token heads. Click a column "
                   "header to sort by another score; select a row to open that head." +
                   (" Scores use the renormalized patterns (sink hidden), except the sink score."
                    if sel.hide_sink else "") +
                   ("" if "induction" in shown else " No induction score: this text repeats no token."))
        columns = {"layer": st.column_config.NumberColumn("layer", format="%d", width=56),
                   "head": st.column_config.NumberColumn("head", format="%d", width=56),
                   **{STATISTICS[k][0]: st.column_config.NumberColumn(SHORT_NAMES[k], format="%.2f",
                                                                      help=STATISTICS[k][1])
                      for k in shown}}
        st.dataframe(table, key="w_stats_table", hide_index=True, height=360, width="stretch",
                     on_select=_picked_in_table, selection_mode="single-row", column_config=columns)

if view == "query":
    with tab["query"]:
        state.query_token_strip(trace)
        st.caption(f"Query token **{escape_markdown(token_label(tokens, sel.query, 24))}**{sink_note}")
        rows = _pattern(sel.layer)[:, sel.query, :]                       # [H, T]
        query_name = va.plotly_text(tokens[sel.query])
        fig = va.query_heads_heatmap(rows, tokens, sel.query, selected=sel.head,
                                     title=f"Query #{sel.query} '{query_name}', layer {sel.layer}")
        show_figure(fig, key="fig_query", filename=f"attention_L{sel.layer}_query{sel.query}")
        top = np.argsort(-rows[sel.head])[:5]
        st.caption(f"Each row is one head's attention from the query token over the tokens before it (it cannot "
                   f"see later ones). Head {sel.head} looks most at: " +
                   ", ".join(f"{escape_markdown(token_label(tokens, int(j)))} ({rows[sel.head, j]:.0%})"
                             for j in top if rows[sel.head, j] >= 0.005) + ".")

if view == "next":
    with tab["next"]:
        ids, probs = top_predictions(trace.next_token_logits, k=10)
        labels = lm.token_strings([int(i) for i in ids])
        fig = va.next_token_bars(labels, probs, title=f"After '{va.plotly_text(tokens[-1])}': top 10 next tokens")
        show_figure(fig, key="fig_next", filename="next_token_top10")
        cut = (f" The text was cut to its first {trace.n_tokens} tokens, so this predicts the token after "
               f"#{trace.n_tokens - 1}, not after the end of your text." if trace.truncated else "")
        st.caption("Softmax of the model's output logits after the last token (temperature 1). The whole "
                   f"vocabulary has {cfg.vocab_size:,} tokens; these 10 hold {probs.sum():.0%} of the "
                   f"probability.{cut}")
