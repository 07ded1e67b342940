"""Figures of the Inside page's "which heads matter" view: each head's direct push on a logit, and the next-token
probabilities with heads switched off. Pure functions: arrays and labels in, plotly figures out."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz import attention as va
from viz.attention import stat_overview
from viz.format import percent_labels, probability_axis
from viz.labels import plotly_escape, row_axis
from viz.text import N_
from viz.theme import ACCENT, PALETTE, apply_theme

BEFORE_COLOR, AFTER_COLOR = PALETTE[0], ACCENT


@dataclass(frozen=True)
class Words:
    """What these figures write (English defaults; pages pass them translated)."""

    logit_contribution: str = N_("logit contribution")
    all_on: str = N_("all heads on")
    switched_off: str = N_("heads switched off")
    probability: str = N_("probability")
    attention: va.Words = va.WORDS


WORDS = Words()


def attribution_figure(heads: np.ndarray, *, selected: tuple[int, int] | None = None,
                       off: Sequence[tuple[int, int]] = (), title: str | None = None,
                       words: Words = WORDS) -> go.Figure:
    """Each head's direct contribution to one logit, [layers, heads] on a diverging scale (layers across, heads
    down, click a cell to pick it: viz.attention.stat_overview), switched-off heads crossed out."""
    fig = stat_overview(heads, label=words.logit_contribution, selected=selected, signed=True, scale_title="logit",
                        title=title, words=words.attention)
    if off:
        layer, head = zip(*off, strict=True)
        fig.add_trace(go.Scatter(x=list(layer), y=list(head), mode="markers", name="switched off",
                                 marker=dict(symbol="x-thin", size=14, line=dict(width=3, color="black")),
                                 hoverinfo="skip", showlegend=False))
    return fig


def ablation_figure(labels: list[str], before: np.ndarray, after: np.ndarray, *, title: str | None = None,
                    height: int | None = None, words: Words = WORDS) -> go.Figure:
    """Next-token probabilities before and after switching heads off, as grouped horizontal bars (one row per
    token, the most likely before on top)."""
    b, a = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    if b.shape != (len(labels),) or a.shape != b.shape:
        raise ValueError(f"before and after need one probability per label ({len(labels)}): {b.shape}, {a.shape}")
    names = [plotly_escape(s) for s in labels]
    top = float(max(b.max(initial=0), a.max(initial=0)))
    texts = [plotly_escape(t) for t in percent_labels(np.concatenate([b, a]))]   # one format for both series
    fig = go.Figure()
    for name, values, text, color in ((words.all_on, b, texts[: b.size], BEFORE_COLOR),
                                      (words.switched_off, a, texts[b.size:], AFTER_COLOR)):
        fig.add_trace(go.Bar(x=values, y=np.arange(len(labels)), orientation="h", name=name, marker_color=color,
                             text=text, textposition="outside", cliponaxis=False,
                             customdata=names, hovertemplate=f"%{{customdata}}<br>{name}: %{{x:.4f}}<extra></extra>"))
    fig.update_yaxes(**row_axis(labels, max_chars=16), showgrid=False)
    fig.update_xaxes(title_text=words.probability, nticks=6, **probability_axis(top * 1.3))
    apply_theme(fig, title=title, height=height or 110 + 44 * len(labels))
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
