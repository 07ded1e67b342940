"""Figures for an encoder-decoder (T5): one head's cross-attention as target x source (the alignment), its other
attentions, and where one written token looked in the source. Pure: numpy arrays + token labels in, plotly figures
out. Rows (queries) run down, columns (keys) across; cells are square."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz.labels import position_axis, token_axis, token_categories
from viz.margins import TICK_PAD_PX, colour_bar_px, tick_angle, tick_depth, title_depth, widest_px
from viz.text import N_
from viz.theme import ACCENT, ATTENTION_SCALE, FONT_SIZE, MASKED_COLOR, PALETTE, TICK_FONT_SIZE, themed_layout

SOURCE_COLOR = PALETTE[0]
LABEL_PX = 18             # a token tick label needs this much room along its axis
PLOT_PX = 560             # about the widest the plot gets beside the sidebar at 1024 px (the labels' angle)
BAR_THICKNESS = 14
MAX_CELL_PX = 34          # a cell's side at most: a short target's matrix stays a strip, not a wall


@dataclass(frozen=True)
class Words:
    """What the encoder-decoder figures write (English defaults; pages pass them translated)."""

    source_axis: str = N_("source token (key)")
    written_axis: str = N_("target token written (query)")
    target_axis: str = N_("target token (query)")
    target_key_axis: str = N_("target token (key)")
    source_query_axis: str = N_("source token (query)")
    weight: str = N_("weight")
    cell_hover: str = N_("%{y} → %{x}<br>weight %{z:.4f}")
    source_hover: str = N_("source %{customdata}<br>weight %{y:.4f}")


WORDS = Words()


def attention_heatmap(weights, row_tokens: list[str], column_tokens: list[str], *, row_title: str,
                      column_title: str, causal: bool = False, highlight_row: int | None = None,
                      title: str | None = None, height: int = 460, max_labels: int = 40, width_px: int = PLOT_PX,
                      words: Words = WORDS) -> go.Figure:
    """One head's [rows, columns] attention (cross-attention: target x source; causal: the decoder's self-attention,
    keys after the query grey), square cells, weight 0 dark; highlight_row outlines one row (a step). The figure is
    at most `height` px tall: as tall as its rows need when the plot's width (about width_px) sets the cells'
    side."""
    w = np.asarray(weights, dtype=np.float32)
    R, C = len(row_tokens), len(column_tokens)
    if w.shape != (R, C):
        raise ValueError(f"weights must be [rows, columns] = [{R}, {C}], got {w.shape}")
    z = np.array(w, copy=True)
    if causal:
        z[np.triu(np.ones((R, C), dtype=bool), k=1)] = np.nan
    rows, columns = token_categories(row_tokens), token_categories(column_tokens)
    finite = z[np.isfinite(z)]
    zmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0      # the colours: 0 .. the top weight
    gap = 1 if max(R, C) <= 48 else 0
    fits = max(4, (height - 140) // LABEL_PX)
    x_axis, y_axis = token_axis(column_tokens, min(max_labels, fits)), token_axis(row_tokens, min(max_labels, fits))
    widest_x, widest_y = widest_px(x_axis["ticktext"], TICK_FONT_SIZE), widest_px(y_axis["ticktext"], TICK_FONT_SIZE)
    angle = tick_angle(widest_x, width_px / max(1, len(x_axis["ticktext"])), TICK_FONT_SIZE)
    axis_title = title_depth(FONT_SIZE)
    bottom = math.ceil(tick_depth(widest_x, angle, TICK_FONT_SIZE) + axis_title)
    top = 60 if title else 20                                        # as themed_layout
    cell = min(MAX_CELL_PX, (width_px - widest_y) / C, max(4.0, (height - top - bottom) / R))
    height = int(min(height, top + bottom + R * cell + 10))
    heat = dict(type="heatmap", z=z, x=columns, y=rows, colorscale=ATTENTION_SCALE, zmin=0.0, zmax=zmax,
                hoverongaps=False, xgap=gap, ygap=gap, name="attention",
                colorbar=dict(title=dict(text=words.weight), thickness=BAR_THICKNESS),
                hovertemplate=words.cell_hover + "<extra></extra>")
    shapes = []
    if highlight_row is not None and 0 <= highlight_row < R:
        shapes.append(dict(type="rect", x0=-0.5, x1=C - 0.5, y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                           line=dict(color=ACCENT, width=2), fillcolor="rgba(0,0,0,0)"))
    margin = dict(l=math.ceil(widest_y + TICK_PAD_PX + axis_title), b=bottom, t=top,
                  r=math.ceil(colour_bar_px(BAR_THICKNESS, height)))
    layout = dict(xaxis=dict(title=dict(text=column_title), **x_axis, tickangle=angle, showgrid=False,
                             zeroline=False, constrain="domain"),
                  yaxis=dict(title=dict(text=row_title), **y_axis, autorange="reversed", showgrid=False,
                             zeroline=False, scaleanchor="x", constrain="domain"),
                  shapes=shapes, plot_bgcolor=MASKED_COLOR, margin=margin)
    return go.Figure([heat], layout=themed_layout(layout, title, height))


def source_row_figure(weights, source_tokens: list[str], *, title: str | None = None, height: int = 260,
                      max_labels: int = 30, words: Words = WORDS) -> go.Figure:
    """Where one written token looked: its cross-attention row over the source tokens, as bars."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(source_tokens)
    if w.shape != (n,):
        raise ValueError(f"weights must have one value per source token ({n}), got {w.shape}")
    top = float(w.max(initial=0.0)) or 1.0
    strongest = int(np.argmax(w)) if n else -1
    colors = [ACCENT if i == strongest else SOURCE_COLOR for i in range(n)]
    bars = dict(type="bar", x=np.arange(n), y=w, marker=dict(color=colors), customdata=token_categories(source_tokens),
                name="cross-attention", hovertemplate=words.source_hover + "<extra></extra>")
    layout = dict(xaxis=dict(title=dict(text=words.source_axis), **position_axis(source_tokens, max_labels),
                             autotickangles=[0, 45, 90]),
                  yaxis=dict(title=dict(text=words.weight), range=[0, top * 1.1], tickformat=".0%"),
                  showlegend=False, bargap=0.1)
    return go.Figure([bars], layout=themed_layout(layout, title, height))

