"""Figures for the Circuits page: the activation-patching map over layers and tokens, and input attributions beside
a head's attention. Pure functions: numpy arrays and translated words in, plotly figures out. (Head roles and head
patching are [layers, heads] maps: viz.attention.stat_overview draws them.)"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.labels import token_axis, token_categories
from viz.text import N_
from viz.theme import ACCENT, DIVERGING_SCALE, PALETTE, apply_theme


@dataclass(frozen=True)
class Words:
    """What the circuit figures write (English defaults; pages pass them translated)."""

    layer: str = N_("layer (stream entering it)")
    position: str = N_("token")
    effect: str = N_("restored")
    patch_hover: str = N_("layer %{x}, token %{y}<br>restored %{z:+.3f}")
    token_hover: str = N_("%{x}: %{y:+.4f}")


WORDS = Words()


def patching_heatmap(effects: np.ndarray, tokens: list[str], *, title: str | None = None, height: int | None = None,
                     words: Words = WORDS) -> go.Figure:
    """The classic causal-tracing map: effects [layers, T] with layers across and tokens down (first on top), a
    diverging scale symmetric about 0 (white: no effect; red: the clean answer restored)."""
    v = np.asarray(effects, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != len(tokens):
        raise ValueError(f"effects must be [layers, {len(tokens)}], got shape {v.shape}")
    L, T = v.shape
    top = float(np.abs(v[np.isfinite(v)]).max(initial=0.0)) or 1.0
    cats = token_categories(tokens)
    fig = go.Figure(go.Heatmap(
        z=v.T, x=list(range(L)), y=cats, colorscale=DIVERGING_SCALE, zmin=-top, zmax=top, xgap=1, ygap=1,
        hovertemplate=words.patch_hover + "<extra></extra>", colorbar=dict(title=dict(text=words.effect),
                                                                            thickness=12)))
    fig.update_xaxes(title_text=words.layer, showgrid=False, zeroline=False)
    fig.update_yaxes(**token_axis(tokens, max_labels=40), autorange="reversed", showgrid=False)
    return apply_theme(fig, title=title, height=height or int(min(560, max(280, 120 + 18 * T))))


def attribution_rows(tokens: list[str], rows: dict[str, np.ndarray], *, title: str | None = None,
                     height: int | None = None, words: Words = WORDS) -> go.Figure:
    """One bar row per measure (name -> [T] values) over the same token axis, each on its own scale; positive bars
    in the first colour, negative ones in the accent."""
    names = list(rows)
    cats = token_categories(tokens)
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=names)
    for i, name in enumerate(names, start=1):
        values = np.asarray(rows[name], dtype=np.float64)
        if values.shape != (len(tokens),):
            raise ValueError(f"{name}: {values.shape} values for {len(tokens)} tokens")
        fig.add_trace(go.Bar(x=cats, y=values, marker_color=np.where(values >= 0, PALETTE[0], ACCENT).tolist(),
                             name=name, hovertemplate=words.token_hover + "<extra></extra>", showlegend=False),
                      row=i, col=1)
        fig.update_yaxes(zeroline=True, zerolinecolor="#888", row=i, col=1)
    fig.update_xaxes(**token_axis(tokens, max_labels=40))                       # every row's axis: categorical
    return apply_theme(fig, title=title, height=height or 110 + 130 * len(names))
