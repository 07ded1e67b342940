"""Figures for the Inside-a-block page (the tokenization view's are in viz/tokenization.py): one token's vectors
through a decoder block, the residual stream's size across layers, the logit lens, and what each head adds to the
prediction.

Pure functions: numpy arrays + labels in, plotly figures out (no streamlit, no torch). Token and row axes are
positional (integer coordinates with escaped tick text from viz.labels), so a token such as "8" or "<br>" never
turns an axis numeric or into markup; every token text (ticks, cells, hovers) goes through plotly_escape.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz import attention as va
from viz.format import percent_labels
from viz.labels import plotly_escape, position_axis, row_axis, shorten
from viz.text import N_, fill
from viz.theme import ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, MASKED_COLOR, PALETTE, apply_theme

CELL_CHARS = 7                        # token text in a lens cell is cut to this many characters


@dataclass(frozen=True)
class Words:
    """What the Inside-a-block figures write (English defaults; pages pass them translated)."""

    dimension: str = N_("dimension")
    dim_hover: str = N_("{label}<br>dim %{x}: %{y:.4g}")
    value: str = N_("value")
    row_dim_hover: str = N_("%{customdata}, dim %{x}: %{z:.4g}")
    head_dimension: str = N_("dimension within the head")
    q_row: str = N_("q head {head} → kv {kv}")
    k_row: str = N_("k (kv head {kv})")
    v_row: str = N_("v (kv head {kv})")
    query_head_hover: str = N_("query head %{text}")
    kv_head_hover: str = N_("key/value head %{text}")
    query_heads: str = N_("query heads")
    kv_heads: str = N_("key/value heads")
    rope_before_after: str = N_("q before and after RoPE")
    rope_angle: str = N_("angle each pair (i, i + {half}) turns by")
    before: str = N_("before")
    after: str = N_("after")
    rope_hover: str = N_("%{customdata} RoPE, dim %{x}: %{z:.4g}")
    angle_hover: str = N_("pair %{x}: %{y:.1f}° (%{customdata:.4g} rad in all)")
    degrees: str = N_("degrees")
    pair_speed: str = N_("pair i (fast → slow)")
    allowed: str = N_("allowed")
    future: str = N_("future: the mask sets it to −∞")
    score_hover: str = N_("key %{customdata[0]}<br>score %{y:.3f}<br>%{customdata[1]}")
    key_j: str = N_("key j")
    score: str = N_("score")
    open: str = N_("open")
    nearly_closed: str = N_("nearly closed (|SiLU| < {limit})")
    channel_hover: str = N_("channel %{customdata}<br>gate %{x:.3f} → %{y:.3f}")
    gate_value: str = N_("gate value")
    nearly_off_gelu: str = N_("nearly off (|GELU| < {limit})")
    channel_hover_up: str = N_("channel %{customdata}<br>up %{x:.3f} → %{y:.3f}")
    up_value: str = N_("value before GELU (W₁x̂' + b₁)")
    embedding: str = N_("embedding")
    after_layer: str = N_("after layer {layer}")
    norm: str = N_("norm")
    norm_hover: str = N_("token %{customdata[0]}<br>%{customdata[1]}<br>norm %{customdata[2]}")
    token_position: str = N_("token position")
    residual_stream: str = N_("residual stream")
    position_token: str = N_("position {position} ({token})")
    median: str = N_("median of all positions")
    row_hover: str = N_("{name}<br>row %{x}: %{y:,.1f}")
    after_layer_axis: str = N_("after layer (emb = the embedding)")
    emb_tick: str = N_("emb")
    norm_log: str = N_("norm (log scale)")
    layer_hover: str = N_("layer %{x}<br>{name}: %{y:.4g}")
    layer: str = N_("layer")
    lens_hover: str = N_("%{customdata[2]}, rank %{x}<br>%{customdata[0]}: %{customdata[1]}")
    lens_grid_hover: str = N_("after %{customdata[2]}, %{customdata[3]}<br>predicts %{customdata[0]} "
                              "(%{customdata[1]})")
    attention: va.Words = va.WORDS


WORDS = Words()


def _symmetric(values: np.ndarray) -> float:
    """Half-range of a diverging scale centred on 0: the largest |finite value| (1 when there is none)."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


# ---------------------------------------------------------------------------------------------- one block
def vectors_figure(rows: dict[str, np.ndarray], *, title: str | None = None, row_px: int = 95,
                   xlabel: str | None = None, colors: Sequence[str] | None = None,
                   words: Words = WORDS) -> go.Figure:
    """Vectors of one length as stacked bar charts sharing the x axis (the dimension), each on its own y scale:
    e.g. a norm's input, its input / rms, its weight and its output. rows: {subplot title: [n] values}.

    A row is drawn as one filled step line from zero (what bars of width 1 with no gap look like), not as n bars:
    the block walk's fifteen rows of 576-1,536 values were ~15,000 SVG bars, most of the page's drawing time."""
    names = list(rows)
    xlabel = words.dimension if xlabel is None else xlabel
    values = [np.asarray(v, dtype=np.float64) for v in rows.values()]
    if not values or any(v.ndim != 1 or v.shape != values[0].shape for v in values):
        raise ValueError("rows must be one or more vectors of the same length")
    n, dims = len(names), np.arange(values[0].size)
    gap = 0.32 / n                                                    # between rows, as a share of the plot height
    row_h = (1 - gap * (n - 1)) / n
    palette = colors or PALETTE
    data, layout, titles = [], {}, []
    for r, (name, v) in enumerate(zip(names, values, strict=True)):   # one dict layout: make_subplots is ~3x slower
        axis = "" if r == 0 else str(r + 1)
        top = 1 - r * (row_h + gap)
        label = plotly_escape(name)
        color = palette[r % len(palette)]
        data.append(go.Scatter(x=dims, y=v, xaxis=f"x{axis}", yaxis=f"y{axis}", name=label, mode="lines",
                               line=dict(shape="hvh", color=color, width=1), fill="tozeroy", fillcolor=color,
                               hoveron="points", hovertemplate=fill(words.dim_hover, label=label) + "<extra></extra>"))
        layout[f"xaxis{axis}"] = dict(anchor=f"y{axis}", matches="x" if r else None, showticklabels=r == n - 1,
                                      type="linear", range=[-0.5, dims.size - 0.5], showgrid=False, zeroline=False,
                                      title=dict(text=xlabel if r == n - 1 else None))
        layout[f"yaxis{axis}"] = dict(anchor=f"x{axis}", domain=[max(0.0, top - row_h), top], type="linear",
                                      zeroline=True, zerolinecolor="#999999", nticks=4)
        titles.append(dict(text=label, x=0, xref="paper", xanchor="left", y=top, yref="paper", yanchor="bottom",
                           showarrow=False, font=dict(size=14)))
    fig = go.Figure(data=data, layout=dict(layout, annotations=titles, showlegend=False, hovermode="closest"))
    return apply_theme(fig, title=title, height=(50 if title else 20) + 50 + row_px * n)


def head_rows_figure(values: np.ndarray, row_labels: list[str], *, title: str | None = None,
                     xlabel: str | None = None, selected: int | None = None, height: int | None = None,
                     scale_title: str | None = None, words: Words = WORDS) -> go.Figure:
    """A [rows, n] matrix (e.g. one value per head and dimension) as a heatmap on a diverging scale centred on 0,
    first row on top; selected outlines a row."""
    z = np.asarray(values, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] != len(row_labels):
        raise ValueError(f"values must be [{len(row_labels)}, n], got {z.shape}")
    top = _symmetric(z)
    names = [plotly_escape(r) for r in row_labels]
    customdata = np.repeat(np.array(names, dtype=object)[:, None], z.shape[1], axis=1)
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(z.shape[1]), y=np.arange(z.shape[0]), colorscale=DIVERGING_SCALE, zmin=-top, zmax=top,
        customdata=customdata, ygap=1, name="values",
        colorbar=dict(title=dict(text=words.value if scale_title is None else scale_title), thickness=12),
        hovertemplate=words.row_dim_hover + "<extra></extra>"))
    if selected is not None and 0 <= selected < z.shape[0]:
        fig.add_shape(type="rect", x0=-0.5, x1=z.shape[1] - 0.5, y0=selected - 0.5, y1=selected + 0.5,
                      line=dict(color=ACCENT, width=3), fillcolor="rgba(0,0,0,0)")
    fig.update_xaxes(title_text=words.dimension if xlabel is None else xlabel, type="linear",
                     range=[-0.5, z.shape[1] - 0.5], showgrid=False,
                     zeroline=False)
    fig.update_yaxes(**row_axis(row_labels, max_chars=22), showgrid=False, zeroline=False)
    return apply_theme(fig, title=title, height=height or (70 if title else 40) + 60 + 24 * z.shape[0])


def qkv_figure(q: np.ndarray, k: np.ndarray, v: np.ndarray, kv_head: np.ndarray, *, selected: int | None = None,
               title: str | None = None, words: Words = WORDS) -> go.Figure:
    """One token's query ([H, hd]), key and value ([KV, hd]) per head, stacked heatmaps sharing the dimension axis,
    each on its own diverging scale (hover for values). Query rows name the KV head they read (GQA)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    H, KV = q.shape[0], k.shape[0]
    if k.shape != v.shape or q.shape[1] != k.shape[1] or len(kv_head) != H:
        raise ValueError(f"q [H, hd], k and v [KV, hd] and kv_head [H] must agree: {q.shape}, {k.shape}, "
                         f"{v.shape}, {len(kv_head)}")
    blocks = (("q", q, [fill(words.q_row, head=h, kv=int(kv_head[h])) for h in range(H)]),
              ("k", k, [fill(words.k_row, kv=j) for j in range(KV)]),
              ("v", v, [fill(words.v_row, kv=j) for j in range(KV)]))
    hd, gap = q.shape[1], 0.06
    unit = (1 - 2 * gap) / (H + 2 * KV)                               # plot height per row of values
    outline = selected is not None and 0 <= selected < H
    data, layout, shapes = [], {}, []
    top = 1.0
    for r, (name, z, labels) in enumerate(blocks):                    # one dict layout: make_subplots is slower
        axis = "" if r == 0 else str(r + 1)
        bottom = max(0.0, top - unit * z.shape[0])
        data.append(go.Heatmap(z=z, x=np.arange(hd), y=np.arange(z.shape[0]), xaxis=f"x{axis}", yaxis=f"y{axis}",
                               coloraxis=f"coloraxis{axis}", ygap=1, name=name,
                               customdata=np.repeat(np.array(labels, dtype=object)[:, None], hd, axis=1),
                               hovertemplate=words.row_dim_hover + "<extra></extra>"))
        half = _symmetric(z)
        layout[f"coloraxis{axis}"] = dict(colorscale=DIVERGING_SCALE, cmin=-half, cmax=half, showscale=False)
        layout[f"xaxis{axis}"] = dict(anchor=f"y{axis}", matches="x" if r else None, showticklabels=r == 2,
                                      type="linear", range=[-0.5, hd - 0.5], showgrid=False, zeroline=False,
                                      title=dict(text=words.head_dimension if r == 2 else None))
        layout[f"yaxis{axis}"] = dict(anchor=f"x{axis}", domain=[bottom, top], showgrid=False, zeroline=False,
                                      **row_axis(labels, max_chars=20))
        if outline:                                                   # the head, then the KV head it reads
            row = selected if r == 0 else int(kv_head[selected])
            shapes.append(dict(type="rect", xref=f"x{axis}", yref=f"y{axis}", x0=-0.5, x1=hd - 0.5, y0=row - 0.5,
                               y1=row + 0.5, line=dict(color=ACCENT, width=3), fillcolor="rgba(0,0,0,0)"))
        top = bottom - gap
    fig = go.Figure(data=data, layout=dict(layout, shapes=shapes))
    return apply_theme(fig, title=title, height=(60 if title else 30) + 70 + 22 * (H + 2 * KV))


def gqa_figure(n_heads: int, n_kv_heads: int, *, selected: int | None = None, title: str | None = None,
               height: int = 170, words: Words = WORDS) -> go.Figure:
    """Grouped-query attention as a diagram: query heads on top, KV heads below, a line from each query head to
    the KV head it reads (h // group); the selected head and its KV head in ACCENT."""
    if n_heads < 1 or n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads})")
    group = n_heads // n_kv_heads
    q_x = np.arange(n_heads, dtype=float)
    kv_x = (np.arange(n_kv_heads) * group + (group - 1) / 2).astype(float)      # under the middle of their group
    chosen_kv = None if selected is None else selected // group
    fig = go.Figure()
    for h in range(n_heads):
        on = h == selected
        fig.add_trace(go.Scatter(x=[q_x[h], kv_x[h // group]], y=[1, 0], mode="lines", hoverinfo="skip",
                                 line=dict(color=ACCENT if on else "#9e9e9e", width=3 if on else 1.5),
                                 showlegend=False, name=f"head {h}"))
    fig.add_trace(go.Scatter(
        x=q_x, y=np.ones(n_heads), mode="markers+text", text=[f"q{h}" for h in range(n_heads)],
        textposition="top center", marker=dict(size=22, symbol="circle",
                                               color=[ACCENT if h == selected else PALETTE[0] for h in range(n_heads)]),
        hovertemplate=words.query_head_hover + "<extra></extra>", showlegend=False, name="query heads"))
    fig.add_trace(go.Scatter(
        x=kv_x, y=np.zeros(n_kv_heads), mode="markers+text", text=[f"kv{j}" for j in range(n_kv_heads)],
        textposition="bottom center", marker=dict(size=28, symbol="square",
                                                  color=[ACCENT if j == chosen_kv else PALETTE[1]
                                                         for j in range(n_kv_heads)]),
        hovertemplate=words.kv_head_hover + "<extra></extra>", showlegend=False, name="kv heads"))
    for y, text in ((1, words.query_heads), (0, words.kv_heads)):
        fig.add_annotation(x=-0.7, y=y, text=text, showarrow=False, xanchor="right", font=dict(size=14))
    fig.update_xaxes(visible=False, range=[-3.2, n_heads - 0.2], type="linear")
    fig.update_yaxes(visible=False, range=[-0.7, 1.7], type="linear")
    apply_theme(fig, title=title, height=height)
    fig.update_layout(margin=dict(l=10, r=10, t=50 if title else 10, b=10), hovermode="closest")
    return fig


def rope_figure(q: np.ndarray, q_rot: np.ndarray, angles: np.ndarray, *, title: str | None = None,
                words: Words = WORDS) -> go.Figure:
    """RoPE on one head's query: the vector before and after the rotation (top, diverging heatmap), and the angle
    each of the hd/2 pairs (i, i + hd/2) is turned by at this position (bottom, degrees mod 360)."""
    q, q_rot, angles = (np.asarray(a, dtype=np.float64) for a in (q, q_rot, angles))
    hd = q.size
    if q_rot.shape != q.shape or angles.shape != (hd // 2,):
        raise ValueError(f"q and q_rot must be [hd] and angles [hd/2]: {q.shape}, {q_rot.shape}, {angles.shape}")
    fig = make_subplots(rows=2, cols=1, row_heights=[0.45, 0.55], vertical_spacing=0.22,
                        subplot_titles=[words.rope_before_after, fill(words.rope_angle, half=hd // 2)])
    z = np.stack([q, q_rot])
    top = _symmetric(z)
    fig.add_trace(go.Heatmap(z=z, x=np.arange(hd), y=[0, 1], colorscale=DIVERGING_SCALE, zmin=-top, zmax=top,
                             ygap=2, showscale=False, name="q",
                             customdata=np.repeat(np.array([words.before, words.after], dtype=object)[:, None], hd,
                                                  axis=1),
                             hovertemplate=words.rope_hover + "<extra></extra>"), row=1, col=1)
    degrees = np.degrees(np.mod(angles, 2 * math.pi))
    fig.add_trace(go.Bar(x=np.arange(hd // 2), y=degrees, marker_color=PALETTE[0], name="angle",
                         customdata=angles, hovertemplate=words.angle_hover + "<extra></extra>"), row=2, col=1)
    fig.update_yaxes(**row_axis([words.before, words.after]), showgrid=False, row=1, col=1)
    fig.update_xaxes(title_text=words.head_dimension, type="linear", range=[-0.5, hd - 0.5], showgrid=False,
                     row=1, col=1)
    fig.update_yaxes(title_text=words.degrees, type="linear", range=[0, 360], tickvals=[0, 90, 180, 270, 360], row=2,
                     col=1)
    fig.update_xaxes(title_text=words.pair_speed, type="linear", range=[-0.5, hd // 2 - 0.5], row=2, col=1)
    for annotation in fig.layout.annotations:
        annotation.update(font=dict(size=14), x=0, xanchor="left")
    return apply_theme(fig, title=title, height=(60 if title else 30) + 340)


def scores_figure(scores: np.ndarray, allowed: np.ndarray, tokens: list[str], *, title: str | None = None,
                  max_labels: int = 24, height: int = 300, words: Words = WORDS) -> go.Figure:
    """One head's scores of one query against every key, before the mask: keys it may attend to in blue, future
    keys (which the mask will set to −∞) in grey. x: the key's position, ticks its token."""
    s = np.asarray(scores, dtype=np.float64)
    ok = np.asarray(allowed, dtype=bool)
    T = len(tokens)
    if s.shape != (T,) or ok.shape != (T,):
        raise ValueError(f"scores and allowed must be [{T}], got {s.shape} and {ok.shape}")
    keys = [plotly_escape(f"{j} {t}") for j, t in enumerate(tokens)]
    status = np.where(ok, words.allowed, words.future).astype(object)
    fig = go.Figure(go.Bar(
        x=np.arange(T), y=s, marker_color=np.where(ok, PALETTE[0], MASKED_COLOR).astype(object),
        customdata=np.stack([np.array(keys, dtype=object), status], axis=-1), name="score",
        hovertemplate=words.score_hover + "<extra></extra>"))
    fig.update_xaxes(title_text=words.key_j, **position_axis(tokens, max_labels), autotickangles=[0, 45, 90],
                     showgrid=False)
    fig.update_yaxes(title_text=words.score, zeroline=True, zerolinecolor="#999999")
    apply_theme(fig, title=title, height=height)
    fig.update_layout(bargap=0.1 if T <= 64 else 0)
    return fig


def activation_figure(gate: np.ndarray, act: np.ndarray, *, near_zero: float, gelu: bool = False,
                      title: str | None = None, height: int = 300, words: Words = WORDS) -> go.Figure:
    """Every gate value of one token on the SiLU curve: x = gate, y = silu(gate) (gelu: every value before a GELU
    MLP's activation on the GELU curve, tanh approximation); the band |act| < near_zero (nearly closed) shaded."""
    g, a = np.asarray(gate, dtype=np.float64), np.asarray(act, dtype=np.float64)
    if g.shape != a.shape or g.ndim != 1:
        raise ValueError(f"gate and act must be vectors of one length, got {g.shape} and {a.shape}")
    lo, hi = min(-3.0, 1.1 * float(g.min(initial=0))), max(3.0, 1.1 * float(g.max(initial=0)))
    curve_x = np.linspace(lo, hi, 400)
    closed = np.abs(a) < near_zero
    fig = go.Figure()
    fig.add_hrect(y0=-near_zero, y1=near_zero, fillcolor=MASKED_COLOR, opacity=0.6, line_width=0)
    if gelu:
        curve = 0.5 * curve_x * (1 + np.tanh(np.sqrt(2 / np.pi) * (curve_x + 0.044715 * curve_x**3)))
        curve_name, closed_words, hover, xtitle, ytitle = ("GELU(x)", words.nearly_off_gelu, words.channel_hover_up,
                                                           words.up_value, "GELU")
    else:
        curve = curve_x / (1 + np.exp(-curve_x))
        curve_name, closed_words, hover, xtitle, ytitle = ("SiLU(x) = x·σ(x)", words.nearly_closed,
                                                           words.channel_hover, words.gate_value, "SiLU(gate)")
    fig.add_trace(go.Scatter(x=curve_x, y=curve, mode="lines", name=curve_name,
                             line=dict(color="#555555", width=2), hoverinfo="skip"))
    closed_name = plotly_escape(fill(closed_words, limit=f"{near_zero:g}"))
    for mask, name, color in ((~closed, words.open, PALETTE[0]), (closed, closed_name, PALETTE[1])):
        fig.add_trace(go.Scattergl(x=g[mask], y=a[mask], mode="markers", name=name, customdata=np.flatnonzero(mask),
                                   marker=dict(size=5, color=color, opacity=0.7),
                                   hovertemplate=hover + "<extra></extra>"))
    fig.update_xaxes(title_text=xtitle, type="linear", zeroline=True, zerolinecolor="#999999")
    fig.update_yaxes(title_text=ytitle, type="linear", zeroline=True, zerolinecolor="#999999")
    apply_theme(fig, title=title, height=height)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), hovermode="closest")
    return fig


# ------------------------------------------------------------------------------------------ residual stream
def _layer_axis(fig: go.Figure, n_rows: int, words: Words) -> None:
    """The y axis of a [layers + 1, ...] table: row 0 the embedding on top ("emb"), row l + 1 after layer l
    ("L<l>"), thinned to about 16 ticks."""
    step = max(1, math.ceil(n_rows / 16))
    fig.update_yaxes(type="linear", tickmode="array", tickvals=list(range(0, n_rows, step)),
                     ticktext=[words.emb_tick if i == 0 else f"L{i - 1}" for i in range(0, n_rows, step)],
                     range=[n_rows - 0.5, -0.5], showgrid=False, zeroline=False)


def _layer_rows(n_rows: int, words: Words) -> list[str]:
    """Row names of a stream / lens table: the embeddings, then after each layer."""
    return [words.embedding] + [fill(words.after_layer, layer=i) for i in range(n_rows - 1)]


def norms_heatmap(norms: np.ndarray, tokens: list[str], *, position: int | None = None, title: str | None = None,
                  max_labels: int = 20, height: int = 430, words: Words = WORDS) -> go.Figure:
    """[layers + 1, T] residual-stream norms, rows = after each layer (embedding on top), columns = positions,
    coloured by log10 of the norm (position 0 grows ~100x larger than the rest); position outlines a column."""
    n = np.asarray(norms, dtype=np.float64)
    T = len(tokens)
    if n.ndim != 2 or n.shape[1] != T:
        raise ValueError(f"norms must be [layers + 1, {T}], got {n.shape}")
    rows = _layer_rows(n.shape[0], words)
    z = np.log10(np.maximum(n, 1e-6))
    lo, hi = math.floor(float(z.min())), math.ceil(float(z.max()))
    ticks = list(range(lo, max(hi, lo + 1) + 1))
    keys = np.broadcast_to(np.array([plotly_escape(f"{j} {t}") for j, t in enumerate(tokens)], dtype=object), n.shape)
    names = np.broadcast_to(np.array(rows, dtype=object)[:, None], n.shape)
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(T), y=np.arange(n.shape[0]), colorscale=ATTENTION_SCALE, zmin=lo, zmax=max(hi, lo + 1),
        customdata=np.stack([keys, names, np.char.mod("%.1f", n).astype(object)], axis=-1), name="norm",
        xgap=1 if T <= 48 else 0,
        colorbar=dict(title=dict(text=words.norm), thickness=12, tickvals=ticks,
                      ticktext=[f"{10.0 ** t:,.0f}" if t >= 0 else f"{10.0 ** t:g}" for t in ticks]),
        hovertemplate=words.norm_hover + "<extra></extra>"))
    if position is not None and 0 <= position < T:
        fig.add_shape(type="rect", x0=position - 0.5, x1=position + 0.5, y0=-0.5, y1=n.shape[0] - 0.5,
                      line=dict(color=ACCENT, width=2), fillcolor="rgba(0,0,0,0)")
    fig.update_xaxes(title_text=words.token_position, **position_axis(tokens, max_labels), autotickangles=[0, 45, 90],
                     showgrid=False)
    _layer_axis(fig, n.shape[0], words)
    fig.update_yaxes(title_text=words.residual_stream)
    return apply_theme(fig, title=title, height=height)


def norm_lines(norms: np.ndarray, position: int, tokens: list[str], *, title: str | None = None,
               height: int = 320, words: Words = WORDS) -> go.Figure:
    """The residual stream's norm after every layer (log scale) at position 0, at the chosen position, and the
    median over all positions."""
    n = np.asarray(norms, dtype=np.float64)
    if n.ndim != 2 or n.shape[1] != len(tokens) or not 0 <= position < n.shape[1]:
        raise ValueError(f"norms must be [layers + 1, {len(tokens)}] and 0 <= position < {len(tokens)}")
    x = np.arange(n.shape[0])
    series = [(fill(words.position_token, position=0, token=shorten(tokens[0], 12)), n[:, 0], PALETTE[3], "solid")]
    if position != 0:
        series.append((fill(words.position_token, position=position, token=shorten(tokens[position], 12)),
                       n[:, position], PALETTE[0], "solid"))
    series.append((words.median, np.median(n, axis=1), "#7f7f7f", "dash"))
    fig = go.Figure()
    for name, y, color, dash in series:
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=plotly_escape(name),
                                 line=dict(color=color, dash=dash, width=2), marker=dict(size=5),
                                 hovertemplate=fill(words.row_hover, name=plotly_escape(name)) + "<extra></extra>"))
    step = 2 if n.shape[0] > 16 else 1
    fig.update_xaxes(title_text=words.after_layer_axis, type="linear", tickmode="array",
                     tickvals=list(range(0, n.shape[0], step)),
                     ticktext=[words.emb_tick if i == 0 else str(i - 1) for i in range(0, n.shape[0], step)])
    fig.update_yaxes(title_text=words.norm_log, type="log", dtick=1)
    apply_theme(fig, title=title, height=height)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), hovermode="x unified")
    return fig


def layer_bars(series: dict[str, np.ndarray], *, title: str | None = None, ytitle: str = "",
               log: bool = False, height: int = 300, colors: Sequence[str] = (PALETTE[0], PALETTE[1]),
               words: Words = WORDS) -> go.Figure:
    """Per-layer values of a few series as grouped bars (layers across), e.g. the size of each layer's attention
    and MLP outputs, or each layer's heads' and MLP's contribution to a logit."""
    names = list(series)
    values = [np.asarray(v, dtype=np.float64) for v in series.values()]
    if not values or any(v.ndim != 1 or v.shape != values[0].shape for v in values):
        raise ValueError("series must be one or more vectors with one value per layer")
    L = values[0].size
    fig = go.Figure()
    for name, v, color in zip(names, values, colors, strict=False):
        fig.add_trace(go.Bar(x=np.arange(L), y=v, name=plotly_escape(name), marker_color=color,
                             hovertemplate=fill(words.layer_hover, name=plotly_escape(name)) + "<extra></extra>"))
    step = 1 if L <= 16 else 2
    fig.update_xaxes(title_text=words.layer, type="linear", tickmode="array", tickvals=list(range(0, L, step)),
                     ticktext=[str(i) for i in range(0, L, step)], range=[-0.5, L - 0.5])
    fig.update_yaxes(title_text=ytitle, type="log" if log else "linear", dtick=1 if log else None, zeroline=True,
                     zerolinecolor="#999999")
    apply_theme(fig, title=title, height=height)
    fig.update_layout(barmode="group", bargap=0.2, legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig


# ----------------------------------------------------------------------------------------------- logit lens
def _cells(labels: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda s: plotly_escape(shorten(s, CELL_CHARS)), otypes=[object])(labels)


def _title_above_top_axis(fig: go.Figure, axis_px: int) -> go.Figure:
    """A figure whose x axis is on top: room for the tick labels under the title (automargin does not count it)."""
    has_title = bool(fig.layout.title.text)
    fig.update_layout(margin_t=(50 if has_title else 10) + axis_px)
    if has_title:
        fig.update_layout(title=dict(y=1.0, yref="container", yanchor="top", pad=dict(t=12)))
    return fig


def lens_top_figure(labels: list[list[str]], probs: np.ndarray, *, title: str | None = None,
                    words: Words = WORDS) -> go.Figure:
    """The logit lens at one position: one row per layer (the embedding on top, the real output at the bottom),
    its top-k next tokens left to right, each cell coloured by its probability (0 to 1)."""
    p = np.asarray(probs, dtype=np.float64)
    names = np.array(labels, dtype=object)
    if p.ndim != 2 or names.shape != p.shape:
        raise ValueError(f"labels and probs must both be [layers + 1, k], got {names.shape} and {p.shape}")
    R, k = p.shape
    rows = _layer_rows(R, words)
    full = np.vectorize(plotly_escape, otypes=[object])(names)
    pct = np.array([plotly_escape(t) for t in percent_labels(p.ravel())], dtype=object).reshape(p.shape)
    fig = go.Figure(go.Heatmap(
        z=p, x=np.arange(1, k + 1), y=np.arange(R), colorscale=ATTENTION_SCALE, zmin=0.0, zmax=1.0, xgap=2, ygap=1,
        text=_cells(names), texttemplate="%{text}", textfont=dict(size=12),
        customdata=np.stack([full, pct, np.broadcast_to(np.array(rows, dtype=object)[:, None], p.shape)], axis=-1),
        colorbar=dict(title=dict(text="p"), thickness=12, tickformat=".0%"), name="lens",
        hovertemplate=words.lens_hover + "<extra></extra>"))
    fig.update_xaxes(type="linear", tickmode="array", tickvals=list(range(1, k + 1)),
                     ticktext=[f"#{i}" for i in range(1, k + 1)], side="top", range=[0.5, k + 0.5], showgrid=False)
    _layer_axis(fig, R, words)
    apply_theme(fig, title=title, height=(60 if title else 30) + 60 + 19 * R)
    return _title_above_top_axis(fig, 30)


def lens_grid_figure(labels: list[list[str]], probs: np.ndarray, tokens: list[str], positions: Sequence[int], *,
                     chosen: int | None = None, title: str | None = None, words: Words = WORDS) -> go.Figure:
    """The logit lens's top-1 token at every (layer, position) of a window: rows = layers (embedding on top),
    columns = input positions (ticks: the input token), cells = the predicted next token coloured by its
    probability; chosen outlines that position's column."""
    p = np.asarray(probs, dtype=np.float64)
    names = np.array(labels, dtype=object)
    W = len(positions)
    if p.ndim != 2 or names.shape != p.shape or p.shape[1] != W or len(tokens) != W:
        raise ValueError(f"labels, probs [layers + 1, {W}] and tokens [{W}] must agree: {names.shape}, {p.shape}, "
                         f"{len(tokens)}")
    R = p.shape[0]
    inputs = [f"{q} {t}" for q, t in zip(positions, tokens, strict=True)]
    full = np.vectorize(plotly_escape, otypes=[object])(names)
    pct = np.array([plotly_escape(t) for t in percent_labels(p.ravel())], dtype=object).reshape(p.shape)
    after = np.broadcast_to(np.array([plotly_escape(s) for s in inputs], dtype=object)[None, :], p.shape)
    rows = np.broadcast_to(np.array(_layer_rows(R, words), dtype=object)[:, None], p.shape)
    fig = go.Figure(go.Heatmap(
        z=p, x=np.arange(W), y=np.arange(R), colorscale=ATTENTION_SCALE, zmin=0.0, zmax=1.0, xgap=1, ygap=1,
        text=_cells(names), texttemplate="%{text}", textfont=dict(size=11),
        customdata=np.stack([full, pct, after, rows], axis=-1), name="lens top-1",
        colorbar=dict(title=dict(text="p"), thickness=12, tickformat=".0%"),
        hovertemplate=words.lens_grid_hover + "<extra></extra>"))
    if chosen is not None and chosen in list(positions):
        c = list(positions).index(chosen)
        fig.add_shape(type="rect", x0=c - 0.5, x1=c + 0.5, y0=-0.5, y1=R - 0.5, line=dict(color=ACCENT, width=3),
                      fillcolor="rgba(0,0,0,0)")
    fig.update_xaxes(**position_axis(
        [f"{q}:{t}" for q, t in zip(positions, tokens, strict=True)], max_labels=W, max_chars=9),
        tickangle=-45, side="top", showgrid=False)
    _layer_axis(fig, R, words)
    apply_theme(fig, title=title, height=(60 if title else 30) + 110 + 19 * R)
    return _title_above_top_axis(fig, 100)
