"""Figures for the Generate page: a step's candidates, the new token's attention over the text so far, and the
probability of each chosen token. Pure: numpy arrays + token labels in, plotly figures out."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz.format import percent_labels, percent_tickformat, probability_axis
from viz.labels import plotly_escape, position_axis, row_axis, token_categories
from viz.text import N_
from viz.theme import ACCENT, HIDDEN_COLOR, MASKED_COLOR, PALETTE, apply_theme, themed_layout

PROMPT_COLOR, NEW_COLOR = PALETTE[0], PALETTE[1]     # prompt tokens blue, generated tokens orange, everywhere


@dataclass(frozen=True)
class Words:
    """What the generation figures write (English defaults; pages pass them translated)."""

    kept: str = N_("kept")
    dropped: str = N_("dropped by top-k / top-p")
    drawn: str = N_("drawn")
    probability: str = N_("probability")
    key_hover: str = N_("key %{customdata}<br>weight %{y:.4f}")
    sink_hover: str = N_("hidden: the attention sink (token 0)")
    earlier_token: str = N_("earlier token (key)")
    weight: str = N_("weight")
    step_hover: str = N_("step %{customdata}<br>p = %{y:.3f}")
    generated_token: str = N_("generated token")


WORDS = Words()
CANDIDATE_TICKS = (0.0, 0.5, 1.0)   # the candidates chart sits in a narrow column: six ticks were drawn turned
LABEL_ROOM = 1.5                    # the axis runs past the longest bar for its value ("99.9949%" was cut at 1.3)


def candidates_figure(labels: list[str], probs, kept, drawn: int | None, *, title: str | None = None,
                      height: int = 380, words: Words = WORDS) -> go.Figure:
    """The top candidates of one step as horizontal bars (most probable on top): kept by top-k / top-p in blue,
    dropped in grey, the drawn one in the accent colour. probs: after temperature, before filtering."""
    p = np.asarray(probs, dtype=np.float64)
    keep = np.asarray(kept, dtype=bool)
    if len(labels) != p.size or keep.shape != p.shape:
        raise ValueError(f"{len(labels)} labels, {p.size} probabilities and {keep.size} kept flags must match")
    colors = np.where(keep, PROMPT_COLOR, MASKED_COLOR).astype(object)
    if drawn is not None and 0 <= drawn < p.size:
        colors[drawn] = ACCENT
    status = np.where(keep, words.kept, words.dropped).astype(object)
    if drawn is not None and 0 <= drawn < p.size:
        status[drawn] = words.drawn
    bars = dict(type="bar", x=p, y=np.arange(p.size), orientation="h", marker=dict(color=list(colors)),
                text=percent_labels(p), textposition="outside", cliponaxis=False, name="probability",
                customdata=np.stack([[plotly_escape(s) for s in labels], status], axis=-1),
                hovertemplate="%{customdata[0]}: %{x:.4f}<br>%{customdata[1]}<extra></extra>")
    axis = probability_axis(float(p.max(initial=0)) * LABEL_ROOM)
    if "tickvals" in axis:                          # a bar near 100%: three ticks fit the narrow column level
        axis["tickvals"] = CANDIDATE_TICKS
    layout = dict(yaxis=dict(**row_axis(labels, max_chars=16), showgrid=False),
                  xaxis=dict(title=dict(text=words.probability), nticks=4, tickangle=0, **axis))
    return go.Figure([bars], layout=themed_layout(layout, title, height))


def attention_row_figure(weights, tokens: list[str], prompt_len: int, *, title: str | None = None,
                         height: int = 300, max_labels: int = 24, words: Words = WORDS) -> go.Figure:
    """One query's attention over every earlier position as bars: prompt tokens blue, generated ones orange;
    NaN weights (the hidden attention sink) are drawn as a pale stub with a hover saying why."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(tokens)
    if w.shape != (n,):
        raise ValueError(f"weights must have one value per token ({n}), got {w.shape}")
    positions = np.arange(n)
    hidden = np.isnan(w)
    finite_top = float(np.nanmax(w)) if (~hidden).any() else 1.0
    traces = [dict(type="bar", x=positions, y=np.nan_to_num(w),
                   marker=dict(color=[PROMPT_COLOR if i < prompt_len else NEW_COLOR for i in positions]),
                   customdata=token_categories(tokens), name="attention",
                   hovertemplate=words.key_hover + "<extra></extra>")]
    if hidden.any():
        traces.append(dict(type="bar", x=positions[hidden], y=np.full(int(hidden.sum()), finite_top),
                           marker=dict(color=HIDDEN_COLOR), name="hidden",
                           hovertemplate=words.sink_hover + "<extra></extra>"))
    layout = dict(xaxis=dict(title=dict(text=words.earlier_token), **position_axis(tokens, max_labels),
                             autotickangles=[0, 45, 90]),
                  yaxis=dict(title=dict(text=words.weight), range=[0, finite_top * 1.1 or 1.0],
                             tickformat=percent_tickformat(finite_top * 1.1)),
                  barmode="overlay", showlegend=False, bargap=0.1)
    return go.Figure(traces, layout=themed_layout(layout, title, height))


def chosen_probability_figure(probs, tokens: list[str], *, current: int | None = None, title: str | None = None,
                              height: int = 260, color: str = NEW_COLOR, words: Words = WORDS) -> go.Figure:
    """The probability each generated token was drawn with, one bar per step (x: the step's token)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (len(tokens),):
        raise ValueError(f"one probability per generated token: {len(tokens)} tokens, got {p.shape}")
    colors = [ACCENT if i == current else color for i in range(p.size)]
    fig = go.Figure(go.Bar(x=np.arange(p.size), y=p, marker_color=colors, customdata=token_categories(tokens),
                           name="chosen token", hovertemplate=words.step_hover + "<extra></extra>"))
    fig.update_xaxes(title_text=words.generated_token, **position_axis(tokens, 16, max_chars=8),
                     autotickangles=[0, 45, 90])
    fig.update_yaxes(title_text="p(chosen)", range=[0, 1.05], tickformat=".0%")
    return apply_theme(fig, title, height)
