"""Figures for the causal-mask page: score / mask / probability matrices with masked cells shown as such.

Masked cells are never a colour of the scale: they are drawn by a separate grey layer with "−∞" (or "0") text and
hover, so a reader cannot confuse "forbidden" with "a very negative score". Token axes are categorical with
position-prefixed labels (viz.labels). Matrices are square (the same size for every step, so two side by side are
equal panels). Pure plotly: no streamlit, no torch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz import attention as va
from viz.attention import LABEL_PX, sink_hidden_layers
from viz.labels import position_axis, token_axis, token_categories
from viz.text import N_, fill
from viz.theme import ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, MASKED_COLOR, PALETTE, apply_theme

MINUS_INF = "−∞"          # U+2212 minus: reads as a real minus sign in every font
ALLOWED_COLOR = "#cfe2f3"  # pale blue for "allowed" cells of the mask itself
AUTO_VALUES_MAX_T = 8      # show numbers in the cells automatically up to this many tokens
AUTO_MARK_MAX_T = 12       # show "−∞" marks in masked cells automatically up to this many tokens


@dataclass(frozen=True)
class Words:
    """What the causal-mask figures write (English defaults; pages pass them translated)."""

    key_axis: str = N_("key j (attended to)")
    query_axis: str = N_("query i (attending)")
    score: str = N_("score")
    probability: str = N_("probability")
    mask: str = N_("mask")
    value_hover: str = N_("query %{y}<br>key %{x}<br>{what}: {value}")
    masked_hover: str = N_("query %{y}<br>key %{x}<br>{what}: {value} (masked: a future token)")
    allowed_hover: str = N_("query %{y}<br>key %{x}<br>mask: 0 (allowed: j ≤ i)")
    leak_hover: str = N_("query %{customdata}<br>attention to future keys: %{y:.1%}")
    leak_x: str = N_("query i")
    leak_y: str = N_("share of attention on j > i")
    attention: va.Words = va.WORDS


WORDS = Words()
X_TICK_ANGLES = [0, 45, 90]   # plotly picks the first that keeps the x labels apart
CHROME_PX = 140            # height a matrix figure needs beyond its square plot: title, x labels, margins


def _text_size(T: int) -> int:
    """Cell text size: large for the worked example, smaller as cells shrink."""
    return 16 if T <= 6 else 13 if T <= 12 else 10


def _format(values: np.ndarray, decimals: int) -> np.ndarray:
    out = np.empty(values.shape, dtype=object)
    for idx, v in np.ndenumerate(values):
        if np.isnan(v):
            out[idx] = ""
        elif np.isinf(v):
            out[idx] = MINUS_INF if v < 0 else "+∞"
        else:
            out[idx] = f"{v:.{decimals}f}".replace("-", "−")
    return out


def _token_axes(fig: go.Figure, tokens: list[str], max_labels: int | None, height: int, words: Words) -> None:
    """Categorical token axes, square cells; labels thinned to what the side fits (or max_labels)."""
    fits = max(4, max(60, height - CHROME_PX) // LABEL_PX)           # labels the square's side has room for
    fig.update_xaxes(title_text=words.key_axis, **token_axis(tokens, max_labels or fits),
                     autotickangles=X_TICK_ANGLES, showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(title_text=words.query_axis, **token_axis(tokens, min(max_labels or fits, fits)),
                     autorange="reversed",
                     showgrid=False, zeroline=False, scaleanchor="x", constrain="domain")


def _masked_layer(blocked: np.ndarray, cats: list[str], text: str, show_marks: bool, what: str,
                  gap: int, words: Words) -> go.Heatmap:
    z = np.where(blocked, 0.0, np.nan)
    marks = np.where(blocked, text, "") if show_marks else None
    return go.Heatmap(
        z=z, x=cats, y=cats, colorscale=[[0, MASKED_COLOR], [1, MASKED_COLOR]], showscale=False, zmin=0, zmax=1,
        text=marks, texttemplate="%{text}" if show_marks else None,
        textfont=dict(color="#555555", size=_text_size(len(blocked))), hoverongaps=False, xgap=gap, ygap=gap,
        name="masked",
        hovertemplate=fill(words.masked_hover, what=what, value=text) + "<extra></extra>")


def matrix_heatmap(values, tokens: list[str], *, allowed=None, kind: str = "scores", title: str | None = None,
                   show_values: bool | None = None, decimals: int = 2, zmax: float | None = None,
                   masked_text: str | None = None, future_outline: bool = False, height: int = 460,
                   colorbar_title: str | None = None, max_labels: int | None = None,
                   sink_hidden: bool = False, show_scale: bool = True, words: Words = WORDS) -> go.Figure:
    """A [T, T] query x key matrix as a square heatmap.

    kind "scores": signed values on the diverging scale, white = 0, symmetric range.
    kind "probs": probabilities on the sequential attention scale from 0 to zmax (default: the largest value).
    allowed: [T, T] bool; False cells are drawn grey with masked_text ("−∞" for scores, "0" for probs) instead of
    a colour of the scale. sink_hidden: the values are a head_stats.sink_hidden_view (key 0 and rows 0-1 NaN),
    drawn pale with a hover saying why. future_outline draws the boundary between past (j <= i) and future keys.
    show_values writes each number in its cell (default: only for tiny matrices) and drops the colour bar;
    show_scale=False drops it too (two matrices side by side: equal squares, the hover gives the values).
    """
    v = np.asarray(values, dtype=np.float64)
    T = len(tokens)
    if v.shape != (T, T):
        raise ValueError(f"values must be [T, T] = [{T}, {T}], got {v.shape}")
    if kind not in ("scores", "probs"):
        raise ValueError(f"kind must be 'scores' or 'probs', got {kind!r}")
    ok = np.ones((T, T), dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if ok.shape != (T, T):
        raise ValueError(f"allowed must be [T, T] = [{T}, {T}], got {ok.shape}")
    shown = np.where(ok & np.isfinite(v), v, np.nan)
    finite = shown[np.isfinite(shown)]
    if show_values is None:
        show_values = T <= AUTO_VALUES_MAX_T
    gap = 1 if T <= 64 else 0
    cats = token_categories(tokens)
    if kind == "scores":
        scale, what = DIVERGING_SCALE, words.score
        top = zmax if zmax is not None else (float(np.abs(finite).max()) if finite.size else 1.0)
        zmin, top = -(top or 1.0), (top or 1.0)
        masked_text = MINUS_INF if masked_text is None else masked_text
        value_fmt = ".3f"
    else:
        scale, what = ATTENTION_SCALE, words.probability
        top = zmax if zmax is not None else (float(finite.max()) if finite.size else 1.0)
        zmin, top = 0.0, (top or 1.0)
        masked_text = "0" if masked_text is None else masked_text
        value_fmt = ".4f"
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=shown, x=cats, y=cats, colorscale=scale, zmin=zmin, zmax=top, hoverongaps=False,
        text=_format(shown, decimals) if show_values else None, texttemplate="%{text}" if show_values else None,
        textfont=dict(size=_text_size(T)), xgap=gap, ygap=gap, name=what,
        showscale=show_scale and not show_values,   # numbers in the cells say it all; the bar would only take width
        colorbar=dict(title=dict(text=colorbar_title, side="right") if colorbar_title else None, thickness=12),
        hovertemplate=fill(words.value_hover, what=what, value=f"%{{z:{value_fmt}}}") + "<extra></extra>"))
    if sink_hidden:
        fig.add_traces(sink_hidden_layers(cats, T, allowed=ok, words=words.attention))
    blocked = ~ok
    if blocked.any():
        fig.add_trace(_masked_layer(blocked, cats, masked_text, show_values or T <= AUTO_MARK_MAX_T, what, gap,
                                    words))
    if future_outline:
        fig.add_shape(_staircase(T))
    _token_axes(fig, tokens, max_labels, height, words)
    apply_theme(fig, title=title, height=height)
    return fig


def _staircase(T: int) -> dict:
    """The line between the allowed triangle (j <= i) and the future (j > i), as a shape in cell coordinates."""
    points = [(-0.5, -0.5)]
    for i in range(T):
        points += [(i + 0.5, i - 0.5), (i + 0.5, i + 0.5)]
    path = "M " + " L ".join(f"{x},{y}" for x, y in points)
    return dict(type="path", path=path, line=dict(color=ACCENT, width=3), xref="x", yref="y")


def mask_heatmap(mask, tokens: list[str], *, title: str | None = None, show_values: bool | None = None,
                 height: int = 460, max_labels: int | None = None, words: Words = WORDS) -> go.Figure:
    """The causal mask as the matrix that is added to the scores: 0 where j <= i (allowed), −∞ where j > i."""
    m = np.asarray(mask, dtype=bool)
    T = len(tokens)
    if m.shape != (T, T):
        raise ValueError(f"mask must be [T, T] = [{T}, {T}], got {m.shape}")
    show = T <= AUTO_MARK_MAX_T if show_values is None else show_values
    gap = 1 if T <= 64 else 0
    cats = token_categories(tokens)
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=np.where(m, 0.0, np.nan), x=cats, y=cats, colorscale=[[0, ALLOWED_COLOR], [1, ALLOWED_COLOR]], zmin=0,
        zmax=1, showscale=False, text=np.where(m, "0", "") if show else None,
        texttemplate="%{text}" if show else None, textfont=dict(color=PALETTE[0], size=_text_size(T)),
        hoverongaps=False, xgap=gap, ygap=gap, name="allowed",
        hovertemplate=words.allowed_hover + "<extra></extra>"))
    if (~m).any():
        fig.add_trace(_masked_layer(~m, cats, MINUS_INF, show, words.mask, gap, words))
    _token_axes(fig, tokens, max_labels, height, words)
    apply_theme(fig, title=title, height=height)
    return fig


def leak_bars(leak, tokens: list[str], *, title: str | None = None, height: int = 320,
              max_labels: int = 40, words: Words = WORDS) -> go.Figure:
    """Per query i: the share of its attention that would go to future keys (j > i) if there were no mask."""
    v = np.asarray(leak, dtype=np.float64).reshape(-1)
    T = len(tokens)
    if v.shape != (T,):
        raise ValueError(f"leak must have one value per token ({T}), got {v.shape}")
    fig = go.Figure(go.Bar(x=np.arange(T), y=v, marker_color=ACCENT, customdata=token_categories(tokens),
                           name="future share",
                           hovertemplate=words.leak_hover + "<extra></extra>"))
    fig.update_xaxes(title_text=words.leak_x, **position_axis(tokens, max_labels), autotickangles=X_TICK_ANGLES)
    fig.update_yaxes(title_text=words.leak_y, range=[0, 1], tickformat=".0%")
    apply_theme(fig, title=title, height=height)
    return fig
