"""The Inside page's residual-stream view (the stream's norm at every layer and position, what each layer's
attention and MLP add at the chosen position) and its logit-lens view (the stream read through the output layer after
every layer)."""
from __future__ import annotations

import numpy as np
import streamlit as st

import viz.inside
from app_core import schemas as S
from app_core.derived import of_trace
from app_core.derived.heads import lens_window
from app_pages.frame import controls
from app_pages.frame import session as caches
from app_pages.frame.i18n import _, translated
from app_pages.frame.widgets import SharedBuilders, show_figure, token_legend
from app_pages.inside.common import tok_md
from viz.labels import plotly_escape, shorten

vi = SharedBuilders(viz.inside)

LENS_WINDOW = 16                    # logit-lens grid: positions around the chosen one (one cached window each)
LENS_K = 5
ss = st.session_state


def words():
    """The figures' words in the session's language."""
    return translated(vi.WORDS)


def stream_view(lm, trace) -> None:
    p = int(ss[S.QUERY.key])
    tokens = trace.tokens
    controls.query_slider(trace, label=_("Position"))
    norms = caches.workspace().compute(of_trace, "residual_norms", trace.text)
    show_figure(vi.norms_heatmap(norms.resid, tokens, position=p, words=words(),
                                 title=_("The residual stream's norm, layer by layer")),
                key="inside_norms", filename="residual_norms")
    big = float(norms.resid[:, 0].max())
    rest = float(np.median(norms.resid[:, 1:])) if trace.n_tokens > 1 else float("nan")
    st.caption((_("Rows: the stream after the embedding and after each layer; columns: positions (log colour scale). "
                  "Position 0 reaches a norm of {big}, against a median of {rest} elsewhere: the blow-up the "
                  "attention sink rides on.") if trace.n_tokens > 1 else
                _("Rows: the stream after the embedding and after each layer; columns: positions (log colour scale). "
                  "Position 0 reaches a norm of {big}.")).format(big=f"{big:,.0f}", rest=f"{rest:,.0f}"))
    show_figure(vi.norm_lines(norms.resid, p, tokens, title=_("Norm after every layer"), words=words()),
                key="inside_norm_lines", filename=f"residual_norm_lines_q{p}")
    show_figure(vi.layer_bars({_("attention adds"): norms.attn[:, p], _("MLP adds"): norms.mlp[:, p]}, log=True,
                              ytitle=_("norm (log scale)"), words=words(),
                              title=_("What each layer adds at {token}").format(
                                  token=plotly_escape(shorten(f"#{p} {tokens[p]}", 20)))),
                key="inside_contributions", filename=f"residual_contributions_q{p}")
    st.caption(_("The size of each layer's attention output and MLP output at this position: the two terms every "
                 "block adds to the stream."))
    token_legend(tokens)


def lens_window_start(p: int, T: int, width: int = LENS_WINDOW) -> int:
    """The first position of the lens window shown for position p: windows start at multiples of width / 2, so p
    sits in the middle half of its window (except near the ends) and a step of p mostly reuses a cached window."""
    half = max(1, width // 2)
    return max(0, min(T - width, (p - half // 2) // half * half))


def lens_view(lm, trace) -> None:
    p = int(ss[S.QUERY.key])
    tokens, T = trace.tokens, trace.n_tokens
    controls.query_slider(trace, label=_("Position"))
    start = lens_window_start(p, T)
    with st.spinner(_("Reading the stream through the output layer after every layer…")):
        top = caches.workspace().compute(lens_window, trace.text, start, LENS_WINDOW, LENS_K)
    labels = np.array(lm.token_labels(top.ids.ravel().tolist()), dtype=object).reshape(top.ids.shape)
    col = p - start
    where = plotly_escape(shorten(f"#{p} {tokens[p]}", 20))
    show_figure(vi.lens_top_figure(labels[:, col].tolist(), top.probs[:, col],
                                   words=words(), title=_("After {token}: the top {k} if the model stopped "
                                                          "here").format(token=where, k=LENS_K)),
                key="inside_lens_top", filename=f"logit_lens_q{p}")
    final = labels[-1, col, 0]
    first = next((r for r in range(labels.shape[0]) if labels[r, col, 0] == final), labels.shape[0] - 1)
    st.caption((_("Each row reads the residual stream after that layer through the model's own final RMSNorm and "
                  "output layer (row 'emb': the embedding alone; the last row is the real prediction). The final top "
                  "token, {token}, is first on top at the embedding.") if first == 0 else
                _("Each row reads the residual stream after that layer through the model's own final RMSNorm and "
                  "output layer (row 'emb': the embedding alone; the last row is the real prediction). The final top "
                  "token, {token}, is first on top after layer {layer}.")).format(token=tok_md(final),
                                                                                layer=first - 1))
    positions = top.positions.tolist()
    show_figure(vi.lens_grid_figure(labels[:, :, 0].tolist(), top.probs[:, :, 0], [tokens[q] for q in positions],
                                    positions, chosen=p, words=words(),
                                    title=_("Top-1 prediction at positions {first}-{last}").format(
                                        first=positions[0], last=positions[-1])),
                key="inside_lens_grid", filename=f"logit_lens_grid_{positions[0]}_{positions[-1]}")
    st.caption(_("Columns: the input tokens {first}-{last} (the chosen one outlined); each cell: the token predicted "
                 "next if the model stopped after that layer, coloured by its probability. Early layers mostly echo "
                 "the input token; the answer forms in the upper half.").format(first=positions[0],
                                                                                 last=positions[-1]))
    token_legend([tokens[q] for q in positions] + labels.ravel().tolist())
