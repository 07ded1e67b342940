"""Figures for the Efficient attention page (and ALiBi / the KV cache on the Positional and Generate pages).

Pure functions: numpy arrays and labels in (every word already translated by the page), plotly figures out; no
streamlit, no torch. Token axes are categorical (viz.labels.token_axis) or integer positions with token tick text
(viz.labels.position_axis), never guessed. Sizes suit a 1024 x 768 projector: fonts from viz.theme, at most a few
dozen tick labels per axis.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.labels import plotly_escape, position_axis, row_axis, token_categories
from viz.theme import ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, MASKED_COLOR, PALETTE, apply_theme

KEPT_COLOR = "#cfe2f3"       # a key the mask keeps (as viz.mask's allowed cells)
DROPPED_COLOR = "#f4a582"    # a past key the mask drops: not the causal mask's grey, so the cut stands out
VISITED_SCALE = [[0, "#c6dbef"], [1, "#08519c"]]   # tiles by visit order: pale first, dark last


LEGEND_ROW_PX = 34          # room above the plot for a one-row legend under the figure's title


def _legend_on_top(fig: go.Figure, titled: bool) -> go.Figure:
    """A one-row legend between the title and the plot (a legend under rotated tick labels collides with them)."""
    fig.update_layout(legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
                      margin=dict(t=(60 if titled else 20) + LEGEND_ROW_PX))
    return fig


# ---------------------------------------------------------------------------------------------- FlashAttention
def tile_order_figure(order: np.ndarray, current: tuple[int, int], ranges: list[str], *, title: str, x_title: str,
                      y_title: str, step_word: str, skipped_word: str, height: int = 430,
                      max_labels: int = 8) -> go.Figure:
    """The grid of [B, B] score tiles: each visited tile coloured (and, when they fit, numbered) by the algorithm's
    order, the current one outlined, tiles not visited yet blank, tiles the causal mask skips grey.

    order: [n, n] float, the step at which tile (query block i, key block j) is visited (NaN: not yet, -1: skipped);
    ranges: the n blocks' token ranges ('0-15'), the labels of both axes (every k-th when there are many)."""
    n = len(ranges)
    cats = [plotly_escape(r) for r in ranges]
    ticks = cats[:: -(-n // max_labels)]
    visited = np.where(order >= 0, order, np.nan)
    skipped = np.where(order < 0, 0.0, np.nan)
    numbered = n <= 12
    text = np.where(order >= 0, np.nan_to_num(order, nan=0).astype(int).astype(str), "") if numbered else None
    fig = go.Figure([
        go.Heatmap(z=visited, x=cats, y=cats, colorscale=VISITED_SCALE, showscale=False, xgap=1, ygap=1,
                   text=text, texttemplate="%{text}" if numbered else None, hoverongaps=False, name=step_word,
                   hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{step_word} %{{z}}<extra></extra>"),
        go.Heatmap(z=skipped, x=cats, y=cats, colorscale=[[0, MASKED_COLOR], [1, MASKED_COLOR]], showscale=False,
                   xgap=1, ygap=1, hoverongaps=False, name=skipped_word,
                   hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{skipped_word}<extra></extra>")])
    i, j = current
    fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, line=dict(color=ACCENT, width=3))
    fig.update_xaxes(title_text=x_title, type="category", categoryorder="array", categoryarray=cats,
                     tickmode="array", tickvals=ticks, ticktext=ticks, tickangle=-45, showgrid=False,
                     constrain="domain")
    fig.update_yaxes(title_text=y_title, type="category", categoryorder="array", categoryarray=cats,
                     tickmode="array", tickvals=ticks, ticktext=ticks, autorange="reversed", scaleanchor="x",
                     showgrid=False, constrain="domain")
    return apply_theme(fig, title, height)


def running_stats_figure(row_labels: list[str], maxima: np.ndarray, sums: np.ndarray, tile_names: list[str], *,
                         titles: tuple[str, str], x_title: str, height: int = 330) -> go.Figure:
    """The running row maximum m and sum l of one query block after each of its tiles so far (one line per
    tile, the latest in the accent colour): m only grows, and l is rescaled whenever m does.
    maxima, sums: [tiles, B] (or a list of [B] arrays); row_labels: the block's query tokens."""
    maxima, sums = np.asarray(maxima, dtype=np.float64), np.asarray(sums, dtype=np.float64)
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.1)
    cats = [plotly_escape(s) for s in row_labels]
    last = len(tile_names) - 1
    for t, name in enumerate(tile_names):
        style = dict(color=ACCENT, width=3) if t == last else dict(color=PALETTE[0], width=1.2)
        for col, values in ((1, maxima), (2, sums)):
            fig.add_trace(go.Scatter(x=cats, y=values[t], mode="lines+markers", line=style, name=name,
                                     opacity=1.0 if t == last else 0.45, showlegend=col == 1 and t == last,
                                     marker=dict(size=5),
                                     hovertemplate=f"{name}<br>%{{x}}: %{{y:.4g}}<extra></extra>"), row=1, col=col)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=cats, title_text=x_title,
                     tickangle=-60, nticks=16)
    fig.update_layout(legend=dict(orientation="h", y=-0.45, x=0))
    return apply_theme(fig, None, height)


def output_pair_figure(partial: np.ndarray, final: np.ndarray, row_labels: list[str], *, titles: tuple[str, str],
                       x_title: str, value_word: str, height: int = 330) -> go.Figure:
    """The query block's output rows so far (rescaled, divided by the running sum) beside the final output:
    [B, d] each, one diverging colour scale."""
    cats = [plotly_escape(s) for s in row_labels]
    top = float(np.abs(final).max()) or 1.0
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.06, shared_yaxes=True)
    for col, values in ((1, partial), (2, final)):
        fig.add_trace(go.Heatmap(z=values, y=cats, coloraxis="coloraxis",
                                 hovertemplate=f"%{{y}}<br>dim %{{x}}<br>{value_word} %{{z:.4f}}<extra></extra>"),
                      row=1, col=col)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=cats, autorange="reversed",
                     showgrid=False)
    fig.update_xaxes(title_text=x_title, showgrid=False)
    fig.update_layout(coloraxis=dict(colorscale=DIVERGING_SCALE, cmin=-top, cmax=top,
                                     colorbar=dict(thickness=12)))
    return apply_theme(fig, None, height)


def bytes_bars(names: list[str], values: list[float], texts: list[str], *, title: str, x_title: str,
               log: bool = True, height: int = 220) -> go.Figure:
    """Horizontal bars, each with its value written; on a log axis (decades only) for sizes that differ by orders
    of magnitude."""
    v = np.asarray(values, dtype=np.float64)
    fig = go.Figure(go.Bar(x=v, y=np.arange(len(names)), orientation="h", text=texts, textposition="outside",
                           cliponaxis=False, marker_color=[PALETTE[i % len(PALETTE)] for i in range(len(names))],
                           customdata=[plotly_escape(n) for n in names],
                           hovertemplate="%{customdata}: %{text}<extra></extra>"))
    fig.update_yaxes(**row_axis(names, max_chars=40), showgrid=False)
    top = float(v.max()) if v.size else 1.0
    if log:
        fig.update_xaxes(type="log", dtick=1, range=[np.log10(max(v.min(), 1.0)) - 0.3, np.log10(top) + 0.8])
    else:
        fig.update_xaxes(range=[0, top * 1.25])
    fig.update_xaxes(title_text=x_title)
    return apply_theme(fig, title, height)


# ------------------------------------------------------------------------------------------------------- masks
def sparse_mask_figure(mask: np.ndarray, *, title: str, x_title: str, y_title: str, height: int = 380) -> go.Figure:
    """A [T, T] mask in three colours: keys it keeps (KEPT_COLOR), past keys it drops (DROPPED_COLOR: the cut),
    future keys (MASKED_COLOR: causal), over token positions (a mask's shape needs no token labels, and they would
    leave the square no room). One uint8 heatmap (a 512-token mask is 0.26 MB, not 2 MB of floats); the page names
    the colours beside it."""
    m = np.asarray(mask, dtype=bool)
    T = len(m)
    if m.shape != (T, T):
        raise ValueError(f"mask must be a square [T, T] array, got {m.shape}")
    state = np.where(m, 0, np.where(np.tri(T, dtype=bool), 1, 2)).astype(np.uint8)   # 0 kept, 1 dropped, 2 future
    colours = (KEPT_COLOR, DROPPED_COLOR, MASKED_COLOR)
    scale = [[edge, colour] for k, colour in enumerate(colours) for edge in (k / 3, (k + 1) / 3)]
    gap = 1 if T <= 64 else 0
    fig = go.Figure(go.Heatmap(z=state, x=np.arange(T), y=np.arange(T), zmin=-0.5, zmax=2.5, colorscale=scale,
                               showscale=False, xgap=gap, ygap=gap, name=title,
                               hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<extra></extra>"))
    fig.update_xaxes(title_text=x_title, showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(title_text=y_title, autorange="reversed", showgrid=False, zeroline=False, scaleanchor="x",
                     constrain="domain")
    return apply_theme(fig, title, height)


def position_lines(series: dict[str, np.ndarray], tokens: list[str], *, title: str, x_title: str, y_title: str,
                   marker: int | None = None, marker_text: str = "", trend: dict[str, np.ndarray] | None = None,
                   height: int = 360, max_labels: int = 30) -> go.Figure:
    """One value per position of the text for each named series (e.g. each predicted token's loss with and
    without a mask), over the tokens as a position axis; a dotted line at `marker` (e.g. the first cut query).
    trend: a smoothed copy of each series (same names), drawn bold over the raw values, which then turn faint."""
    fig = go.Figure()
    cats = token_categories(tokens)
    for k, (name, values) in enumerate(series.items()):
        y = np.asarray(values, dtype=np.float64)
        colour = PALETTE[k % len(PALETTE)] if k else "#555555"
        fig.add_trace(go.Scatter(x=np.arange(len(y)), y=y, mode="lines", name=name, customdata=cats[:len(y)],
                                 line=dict(color=colour, width=1 if trend else 2), opacity=0.35 if trend else 1.0,
                                 showlegend=not trend,
                                 hovertemplate=f"{plotly_escape(name)}<br>%{{customdata}}: %{{y:.3f}}<extra></extra>"))
        if trend:
            smooth = np.asarray(trend[name], dtype=np.float64)
            fig.add_trace(go.Scatter(x=np.arange(len(smooth)), y=smooth, mode="lines", name=name,
                                     line=dict(color=colour, width=3), hoverinfo="skip"))
    if marker is not None and 0 <= marker < len(tokens):
        fig.add_vline(x=marker - 0.5, line=dict(color=ACCENT, width=1.5, dash="dot"),
                      annotation_text=marker_text, annotation_position="top right")
    fig.update_xaxes(title_text=x_title, **position_axis(tokens, max_labels, max_chars=8), tickangle=-60)
    fig.update_yaxes(title_text=y_title)
    apply_theme(fig, title, height)
    return _legend_on_top(fig, bool(title))


def next_token_compare(labels: list[str], probs: dict[str, np.ndarray], *, title: str, x_title: str,
                       height: int = 340) -> go.Figure:
    """The same candidate next tokens (most probable first) under two or more runs, as grouped horizontal bars."""
    fig = go.Figure()
    for k, (name, p) in enumerate(probs.items()):
        fig.add_trace(go.Bar(x=np.asarray(p, dtype=np.float64), y=np.arange(len(labels)), orientation="h", name=name,
                             marker_color="#888888" if k == 0 else PALETTE[k % len(PALETTE)],
                             customdata=[plotly_escape(s) for s in labels],
                             hovertemplate=f"{plotly_escape(name)}<br>%{{customdata}}: %{{x:.2%}}<extra></extra>"))
    fig.update_yaxes(**row_axis(labels, max_chars=16), showgrid=False)
    fig.update_xaxes(title_text=x_title, tickformat=".0%", rangemode="tozero")
    fig.update_layout(barmode="group")
    apply_theme(fig, title, height)
    return _legend_on_top(fig, bool(title))


# ------------------------------------------------------------------------------------------- linear attention
def pattern_pair(left: np.ndarray, right: np.ndarray, tokens: list[str], *, titles: tuple[str, str], x_title: str,
                 y_title: str, colour_title: str, height: int = 500) -> go.Figure:
    """Two [T, T] causal patterns side by side on one colour scale (future cells grey)."""
    T = len(tokens)
    future = ~np.tri(T, dtype=bool)
    shown = [np.where(future, np.nan, np.asarray(p, dtype=np.float32)) for p in (left, right)]
    rows = slice(1, None) if T > 1 else slice(None)                 # row 0 is always 1: it would flatten the scale
    top = float(max(np.nanmax(s[rows]) for s in shown)) or 1.0
    positions = np.arange(T)
    hover = f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>%{{z:.3f}}<extra></extra>"
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.05, shared_yaxes=True)
    for col, z in ((1, shown[0]), (2, shown[1])):
        fig.add_trace(go.Heatmap(z=z, x=positions, y=positions, coloraxis="coloraxis", hoverongaps=False,
                                 hovertemplate=hover), row=1, col=col)
    axis = position_axis(tokens, max_labels=12, max_chars=8)
    axis.pop("range")
    fig.update_xaxes(**axis, title_text=x_title, tickangle=-60, showgrid=False, zeroline=False)
    fig.update_yaxes(**position_axis(tokens, max_labels=30, max_chars=9), autorange="reversed", showgrid=False,
                     zeroline=False)
    fig.update_yaxes(title_text=y_title, col=1)
    fig.update_layout(plot_bgcolor=MASKED_COLOR, coloraxis=dict(
        colorscale=ATTENTION_SCALE, cmin=0, cmax=top,
        colorbar=dict(title=dict(text=colour_title, side="top"), thickness=10)))
    return apply_theme(fig, None, height)


def cost_figure(positions: np.ndarray, costs: dict[str, np.ndarray], *, current: int, current_text: str,
                title: str, x_title: str, y_title: str, height: int = 330) -> go.Figure:
    """Work per generated token as the text grows, one line per method; a dotted line at this text's length."""
    fig = go.Figure()
    for k, (name, y) in enumerate(costs.items()):
        fig.add_trace(go.Scatter(x=positions, y=y, mode="lines", name=name, line=dict(color=PALETTE[k], width=2.5),
                                 hovertemplate=f"{plotly_escape(name)}<br>t = %{{x}}: %{{y:,.0f}}<extra></extra>"))
    fig.add_vline(x=current, line=dict(color=ACCENT, dash="dot"), annotation_text=current_text,
                  annotation_position="top left")
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    apply_theme(fig, title, height)
    return _legend_on_top(fig, bool(title))


# ------------------------------------------------------------------------------------------------------- ALiBi
def slopes_figure(slopes: np.ndarray, *, selected: int, title: str, x_title: str, y_title: str,
                  height: int = 300) -> go.Figure:
    """Each head's ALiBi slope on a log axis (the geometric sequence is a straight line), the selected head red."""
    s = np.asarray(slopes, dtype=np.float64)
    colours = [ACCENT if h == selected else PALETTE[0] for h in range(s.size)]
    fig = go.Figure(go.Bar(x=np.arange(s.size), y=s, marker_color=colours, text=[f"1/{1 / v:.3g}" for v in s],
                           textposition="outside", cliponaxis=False,
                           hovertemplate=f"{x_title} %{{x}}<br>{y_title} %{{y:.5g}}<extra></extra>"))
    fig.update_xaxes(title_text=x_title, tickmode="array", tickvals=list(range(s.size)), type="linear")
    fig.update_yaxes(title_text=y_title, type="log", dtick=1, range=[np.log10(s.min()) - 0.3, np.log10(s.max()) + 0.5])
    return apply_theme(fig, title, height)


def bias_heatmap(bias: np.ndarray, *, title: str, x_title: str, y_title: str, value_word: str,
                 height: int = 430) -> go.Figure:
    """One head's ALiBi bias [T, T] (0 on the diagonal, more negative further back; future cells grey)."""
    b = np.asarray(bias, dtype=np.float64)
    shown = np.where(np.isfinite(b), b, np.nan)
    low = float(np.nanmin(shown)) if np.isfinite(shown).any() else -1.0
    T = len(b)
    fig = go.Figure(go.Heatmap(z=shown, x=np.arange(T), y=np.arange(T), colorscale="Blues_r", zmin=low, zmax=0,
                               hoverongaps=False, colorbar=dict(thickness=12, title=dict(text=value_word)),
                               xgap=1 if T <= 32 else 0, ygap=1 if T <= 32 else 0,
                               hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{value_word} %{{z:.3f}}"
                                             "<extra></extra>"))
    fig.update_xaxes(title_text=x_title, showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(title_text=y_title, autorange="reversed", scaleanchor="x", showgrid=False, zeroline=False,
                     constrain="domain")
    fig.update_layout(plot_bgcolor=MASKED_COLOR)
    return apply_theme(fig, title, height)


def alibi_rope_figure(distances: np.ndarray, alibi: np.ndarray, head_names: list[str], selected: int,
                      rope: dict[str, np.ndarray], *, titles: tuple[str, str], x_title: str,
                      y_titles: tuple[str, str], height: int = 520) -> go.Figure:
    """Top: ALiBi's relative weight exp(-m Δ) of a key Δ tokens back, one line per head (the selected one red).
    Bottom: RoPE's relative score of aligned content at the same distances (one line per base)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.12)
    for h, name in enumerate(head_names):
        chosen = h == selected
        fig.add_trace(go.Scatter(x=distances, y=alibi[h], mode="lines", name=name, showlegend=False,
                                 line=dict(color=ACCENT if chosen else PALETTE[0], width=3 if chosen else 1.2),
                                 opacity=1.0 if chosen else 0.5,
                                 hovertemplate=f"{plotly_escape(name)}<br>Δ = %{{x}}: %{{y:.3g}}<extra></extra>"),
                      row=1, col=1)
    for k, (name, y) in enumerate(rope.items()):
        fig.add_trace(go.Scatter(x=distances, y=y, mode="lines", name=name, line=dict(color=PALETTE[k + 1], width=2),
                                 hovertemplate=f"{plotly_escape(name)}<br>Δ = %{{x}}: %{{y:.3f}}<extra></extra>"),
                      row=2, col=1)
    fig.update_yaxes(title_text=y_titles[0], range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text=y_titles[1], row=2, col=1)
    fig.update_xaxes(title_text=x_title, row=2, col=1)
    fig.update_layout(legend=dict(orientation="h", y=-0.15, x=0))
    return apply_theme(fig, None, height)


# ------------------------------------------------------------------------------------------------------ KV cache
def kv_cache_figure(lengths: np.ndarray, cache_bytes: np.ndarray, cached_ms: np.ndarray, full_lengths: np.ndarray,
                    full_ms: np.ndarray, *, titles: tuple[str, str], x_title: str, y_titles: tuple[str, str],
                    names: tuple[str, str], height: int = 360) -> go.Figure:
    """Left: the KV cache's size after each step (it grows by the same bytes per token). Right: the measured time
    of each step with the cache, and of recomputing the whole prefix at the lengths where that was timed."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.12)
    fig.add_trace(go.Scatter(x=lengths, y=np.asarray(cache_bytes) / 2**20, mode="lines+markers", showlegend=False,
                             line=dict(color=PALETTE[0]), hovertemplate="%{x}: %{y:.2f} MiB<extra></extra>"),
                  row=1, col=1)
    for k, (name, x, ms) in enumerate(zip(names, (lengths, full_lengths), (cached_ms, full_ms), strict=True)):
        fig.add_trace(go.Scatter(x=x, y=ms, mode="lines+markers", name=name,
                                 line=dict(color=PALETTE[2] if k == 0 else ACCENT, width=2.5),
                                 hovertemplate=f"{plotly_escape(name)}<br>%{{x}}: %{{y:.1f}} ms<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_titles[0], rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=y_titles[1], rangemode="tozero", row=1, col=2)
    apply_theme(fig, None, height)
    return _legend_on_top(fig, True)
