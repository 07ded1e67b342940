"""Figures for the causal-mask page: score / mask / probability matrices with masked cells shown as such.

Masked cells are never a colour of the scale: they are drawn by a separate grey layer with "−∞" (or "0") text and
hover, so a reader cannot confuse "forbidden" with "a very negative score". Axes are numeric positions with the
token strings as tick text (token strings are not unique). Pure plotly: no streamlit, no torch.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz.theme import ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, MASKED_COLOR, PALETTE, apply_theme, token_tick_labels

MINUS_INF = "−∞"          # U+2212 minus: reads as a real minus sign in every font
ALLOWED_COLOR = "#cfe2f3"  # pale blue for "allowed" cells of the mask itself
AUTO_VALUES_MAX_T = 8      # show numbers in the cells automatically up to this many tokens
AUTO_MARK_MAX_T = 12       # show "−∞" marks in masked cells automatically up to this many tokens
HIDDEN_COLOR = "#f4f4f4"   # cells left out of the view (the attention sink when it is hidden)


def _text_size(T: int) -> int:
    """Cell text size: large for the worked example, smaller as cells shrink."""
    return 16 if T <= 6 else 13 if T <= 12 else 10


def _cell_labels(tokens: list[str]) -> np.ndarray:
    """customdata [T, T, 2]: (query label, key label) for hover text."""
    labels = np.array([f"{i}: {t}" for i, t in enumerate(tokens)], dtype=object)
    T = len(tokens)
    return np.stack([np.repeat(labels[:, None], T, axis=1), np.repeat(labels[None, :], T, axis=0)], axis=-1)


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


X_TICK_ANGLES = [0, 45, 90]   # plotly picks the first that keeps the x labels apart (measured in the browser)
ROW_PX = 16                   # a token label (14 px font) on the y axis needs about this many pixels of height


def _y_label_budget(height: int) -> int:
    """How many token labels fit on the y axis of a figure this tall (title, x labels and margins take ~170 px)."""
    return max(4, (height - 170) // ROW_PX)


def _token_axes(fig: go.Figure, tokens: list[str], max_labels: int, height: int) -> None:
    """Token strings as tick text on both axes: x thinned to max_labels (the width is the caller's to know), y to
    what the figure height fits. The x labels are horizontal when they fit, else 45° or 90° (never overlapping)."""
    T = len(tokens)
    x_ticks, x_text = token_tick_labels(tokens, max_labels=max_labels)
    y_ticks, y_text = token_tick_labels(tokens, max_labels=_y_label_budget(height))
    fig.update_xaxes(title_text="key j (attended to)", tickmode="array", tickvals=x_ticks, ticktext=x_text,
                     autotickangles=X_TICK_ANGLES, range=[-0.5, T - 0.5], showgrid=False,
                     zeroline=False)
    fig.update_yaxes(title_text="query i (attending)", tickmode="array", tickvals=y_ticks, ticktext=y_text,
                     range=[T - 0.5, -0.5], showgrid=False, zeroline=False)


def _masked_layer(blocked: np.ndarray, customdata: np.ndarray, text: str, show_marks: bool, what: str,
                  gap: int) -> go.Heatmap:
    z = np.where(blocked, 0.0, np.nan)
    marks = np.where(blocked, text, "")
    return go.Heatmap(
        z=z, colorscale=[[0, MASKED_COLOR], [1, MASKED_COLOR]], showscale=False, zmin=0, zmax=1,
        customdata=customdata, text=marks, texttemplate="%{text}" if show_marks else None,
        textfont=dict(color="#555555", size=_text_size(len(blocked))), hoverongaps=False, xgap=gap, ygap=gap,
        name="masked",
        hovertemplate=f"query %{{customdata[0]}}<br>key %{{customdata[1]}}<br>{what}: {text} "
                      f"(masked: a future token)<extra></extra>")


def matrix_heatmap(values, tokens: list[str], *, allowed=None, kind: str = "scores", title: str | None = None,
                   show_values: bool | None = None, decimals: int = 2, zmax: float | None = None,
                   masked_text: str | None = None, future_outline: bool = False, height: int | None = None,
                   colorbar_title: str | None = None, max_labels: int = 40, hidden=None) -> go.Figure:
    """A [T, T] query x key matrix as a heatmap.

    kind "scores": signed values on the diverging scale, white = 0, symmetric range.
    kind "probs": probabilities on the sequential attention scale from 0 to zmax (default: the largest value).
    allowed: [T, T] bool; False cells are drawn grey with masked_text ("−∞" for scores, "0" for probs) instead of
    a colour of the scale. hidden: [T, T] bool, cells left out of the view (e.g. the attention sink when it is
    hidden), drawn in a very light grey with their own hover text. future_outline draws the boundary between past
    (j <= i) and future (j > i) keys.
    show_values writes each number in its cell (default: only for tiny matrices) and drops the colour bar.
    colorbar_title: none by default (the figure title says what the colours are; narrow columns need the width).
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
    hide = np.zeros((T, T), dtype=bool) if hidden is None else np.asarray(hidden, dtype=bool) & ok
    if hide.shape != (T, T):
        raise ValueError(f"hidden must be [T, T] = [{T}, {T}], got {hide.shape}")
    shown = np.where(ok & ~hide & np.isfinite(v), v, np.nan)
    finite = shown[np.isfinite(shown)]
    if show_values is None:
        show_values = T <= AUTO_VALUES_MAX_T
    gap = 1 if T <= 64 else 0
    customdata = _cell_labels(tokens)
    if kind == "scores":
        scale, what = DIVERGING_SCALE, "score"
        top = zmax if zmax is not None else (float(np.abs(finite).max()) if finite.size else 1.0)
        zmin, top = -(top or 1.0), (top or 1.0)
        masked_text = MINUS_INF if masked_text is None else masked_text
        value_fmt = ".3f"
    else:
        scale, what = ATTENTION_SCALE, "probability"
        top = zmax if zmax is not None else (float(finite.max()) if finite.size else 1.0)
        zmin, top = 0.0, (top or 1.0)
        masked_text = "0" if masked_text is None else masked_text
        value_fmt = ".4f"
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=shown, colorscale=scale, zmin=zmin, zmax=top, customdata=customdata, hoverongaps=False,
        text=_format(shown, decimals) if show_values else None, texttemplate="%{text}" if show_values else None,
        textfont=dict(size=_text_size(T)),
        xgap=gap, ygap=gap, name=what,
        showscale=not show_values,   # numbers in the cells say it all; the bar would only take width
        colorbar=dict(title=dict(text=colorbar_title, side="right") if colorbar_title else None, thickness=12),
        hovertemplate=f"query %{{customdata[0]}}<br>key %{{customdata[1]}}<br>{what}: %{{z:{value_fmt}}}"
                      f"<extra></extra>"))
    if hide.any():
        fig.add_trace(go.Heatmap(
            z=np.where(hide, 0.0, np.nan), colorscale=[[0, HIDDEN_COLOR], [1, HIDDEN_COLOR]], showscale=False,
            zmin=0, zmax=1, customdata=customdata, hoverongaps=False, xgap=gap, ygap=gap, name="hidden",
            hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>hidden (attention sink); the row is "
                          "renormalized without it<extra></extra>"))
    blocked = ~ok
    if blocked.any():
        fig.add_trace(_masked_layer(blocked, customdata, masked_text, show_values or T <= AUTO_MARK_MAX_T, what,
                                    gap))
    if future_outline:
        fig.add_trace(_staircase(T))
    height = height or _auto_height(T)
    _token_axes(fig, tokens, max_labels, height)
    apply_theme(fig, title=title, height=height)
    return fig


def _staircase(T: int) -> go.Scatter:
    """The line between the allowed triangle (j <= i) and the future (j > i)."""
    xs, ys = [-0.5], [-0.5]
    for i in range(T):
        xs += [i + 0.5, i + 0.5]
        ys += [i - 0.5, i + 0.5]
    return go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=ACCENT, width=3), hoverinfo="skip",
                      name="past | future", showlegend=False)


def _auto_height(T: int) -> int:
    return int(min(620, max(360, 200 + 16 * T)))


def mask_heatmap(mask, tokens: list[str], *, title: str | None = None, show_values: bool | None = None,
                 height: int | None = None, max_labels: int = 40) -> go.Figure:
    """The causal mask as the matrix that is added to the scores: 0 where j <= i (allowed), −∞ where j > i."""
    m = np.asarray(mask, dtype=bool)
    T = len(tokens)
    if m.shape != (T, T):
        raise ValueError(f"mask must be [T, T] = [{T}, {T}], got {m.shape}")
    show = T <= AUTO_MARK_MAX_T if show_values is None else show_values
    gap = 1 if T <= 64 else 0
    customdata = _cell_labels(tokens)
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=np.where(m, 0.0, np.nan), colorscale=[[0, ALLOWED_COLOR], [1, ALLOWED_COLOR]], zmin=0, zmax=1,
        showscale=False, customdata=customdata, text=np.where(m, "0", ""), texttemplate="%{text}" if show else None,
        textfont=dict(color=PALETTE[0], size=_text_size(T)), hoverongaps=False, xgap=gap, ygap=gap, name="allowed",
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>mask: 0 (allowed: j ≤ i)<extra></extra>"))
    if (~m).any():
        fig.add_trace(_masked_layer(~m, customdata, MINUS_INF, show, "mask", gap))
    height = height or _auto_height(T)
    _token_axes(fig, tokens, max_labels, height)
    apply_theme(fig, title=title, height=height)
    return fig


def leak_bars(leak, tokens: list[str], *, title: str | None = None, height: int = 320,
              max_labels: int = 40) -> go.Figure:
    """Per query i: the share of its attention that would go to future keys (j > i) if there were no mask."""
    v = np.asarray(leak, dtype=np.float64).reshape(-1)
    T = len(tokens)
    if v.shape != (T,):
        raise ValueError(f"leak must have one value per token ({T}), got {v.shape}")
    ticks, text = token_tick_labels(tokens, max_labels=max_labels)
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    fig = go.Figure(go.Bar(x=np.arange(T), y=v, marker_color=ACCENT, customdata=labels, name="future share",
                           hovertemplate="query %{customdata}<br>attention to future keys: %{y:.1%}<extra></extra>"))
    fig.update_xaxes(title_text="query i", tickmode="array", tickvals=ticks, ticktext=text,
                     autotickangles=X_TICK_ANGLES)
    fig.update_yaxes(title_text="share of attention on j > i", range=[0, 1], tickformat=".0%")
    apply_theme(fig, title=title, height=height)
    return fig
