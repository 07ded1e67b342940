"""A live class's clicks on a point question: for each token of the text, in its order, the share of the class that
clicked it, and beside it (once the answer is revealed) the model's own row: a head's attention from the question's
position, or the probability that each token comes next. Pure plotly: no streamlit, no torch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz.format import percent_labels
from viz.labels import plotly_escape, position_axis, position_labels
from viz.text import N_
from viz.theme import ACCENT, PALETTE, themed_layout

CLASS_COLOR = PALETTE[1]
MODEL_COLOR = PALETTE[0]
HEIGHT = 220


@dataclass(frozen=True)
class Words:
    """What the figure writes (English defaults; pages pass them translated)."""

    clicks: str = N_("the class's clicks")
    model: str = N_("the model")
    share: str = N_("share")
    clicks_hover: str = N_("%{customdata[0]}<br>%{customdata[1]} clicks (%{y:.0%})")
    model_hover: str = N_("%{customdata}<br>the model: %{y:.3f}")


WORDS = Words()


def class_points(tokens: list[str], clicks, model_row=None, right=(), words: Words = WORDS) -> go.Figure:
    """Bars over the text's positions: the share of the class's clicks on each token (clicks: a count per position),
    and, when model_row is given (one value per position), the model's row beside them, the right positions
    (`right`) marked."""
    n = len(tokens)
    counts = np.asarray(clicks, dtype=np.float64).reshape(-1)                  # [T]
    if counts.shape != (n,):
        raise ValueError(f"clicks: {counts.shape[0]} counts for {n} tokens")
    total = counts.sum()
    share = counts / total if total else counts                                # [T]
    labels = [plotly_escape(label) for label in position_labels(tokens)]
    traces = [go.Bar(x=np.arange(n), y=share, name=words.clicks, marker=dict(color=CLASS_COLOR, line=dict(width=0)),
                     customdata=np.column_stack([labels, counts.astype(int)]), hovertemplate=words.clicks_hover
                     + "<extra></extra>", text=[t if c else "" for t, c in zip(percent_labels(share), counts,
                                                                               strict=True)],
                     textposition="outside", cliponaxis=False)]
    top = float(share.max(initial=0.0))
    if model_row is not None:
        row = np.asarray(model_row, dtype=np.float64).reshape(-1)              # [T]
        if row.shape != (n,):
            raise ValueError(f"model_row: {row.shape[0]} values for {n} tokens")
        marked = {int(i) for i in right}
        traces.append(go.Bar(x=np.arange(n), y=row, name=words.model, customdata=labels,
                             marker=dict(color=[ACCENT if i in marked else MODEL_COLOR for i in range(n)],
                                         line=dict(width=0)),
                             hovertemplate=words.model_hover + "<extra></extra>"))
        top = max(top, float(row.max(initial=0.0)))
    layout = dict(barmode="group", bargap=0.25, showlegend=True,
                  legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0),
                  xaxis=position_axis(tokens, max_labels=60),
                  yaxis=dict(range=[0, max(top, 0.05) * 1.25], tickformat=".0%", title=words.share))
    return go.Figure(traces, layout=themed_layout(layout, height=HEIGHT))
