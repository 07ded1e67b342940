"""Figures for the positional-encodings page: sinusoidal PE and RoPE. Pure: numpy arrays + labels -> go.Figure."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz.format import SI, format_si
from viz.labels import position_axis
from viz.text import N_, fill
from viz.theme import ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, MASKED_COLOR, PALETTE, TICK_FONT_SIZE, apply_theme

Q_COLOR, K_COLOR = PALETTE[0], PALETTE[1]          # query blue, key orange, everywhere on the page
Q_LIGHT, K_LIGHT = "#9ecae1", "#fdd0a2"            # the same vectors before rotation


@dataclass(frozen=True)
class Words:
    """What the positional-encoding figures write (English defaults; pages pass them translated)."""

    pe_hover: str = N_("position %{y}<br>dimension %{x}<br>PE = %{z:.3f}")
    position_p: str = N_("position p")
    position_q: str = N_("position q")
    dimension_axis: str = N_("dimension (even: sin, odd: cos)")
    pe_title: str = N_("Sinusoidal PE, base {base} ({positions} positions × {dims} dims)")
    dim: str = N_("dim {dim}")
    wave_hover: str = N_("dim {dim} ({kind})<br>position %{x}<br>PE = %{customdata:.3f}")
    wave_tick: str = N_("dim {dim}: {kind}, pair {pair}<br>λ = {wavelength} tokens")
    waves_title: str = N_("Waves: each dimension is a sine or cosine of the position")
    offset_k: str = N_("offset k")
    dot: str = N_("dot")
    offset_title: str = N_("PE(p)·PE(p+k) for three p")
    similarity_title: str = N_("PE(p)·PE(q), all pairs")
    learned_similarity_title: str = N_("Cosine similarity of the learned positions P[p], P[q]")
    cosine: str = N_("cosine")
    components_title: str = N_("The learned positions' leading principal components, as waves over position")
    component: str = N_("component {i} ({share} of the variance)")
    coordinate: str = N_("coordinate")
    position: str = N_("position")
    theta_hover: str = N_("pair %{x}<br>θ = %{y:.3g} rad/token")
    lambda_hover: str = N_("pair %{x}<br>λ = %{y:,.0f} tokens")
    context: str = N_("context {n}")
    pair_index: str = N_("pair index i")
    theta_axis: str = N_("θᵢ (radians per token)")
    lambda_axis: str = N_("λᵢ = 2π/θᵢ (tokens per turn)")
    position: str = N_("position")
    angle_hover: str = N_("position %{marker.color}<br>angle = %{text}")
    position_n: str = N_("position {n}")
    first_coordinate: str = N_("first coordinate")
    second_coordinate: str = N_("second coordinate")
    rotation_title: str = N_("Pair {pair}: θ = {theta} rad/token<br><sup>λ = {wavelength} tokens · {turns} turns by "
                             "position {last}</sup>")
    adjacent: str = N_("adjacent (2i, 2i+1): RoPE paper, GGUF file on disk")
    half_split: str = N_("half-split (i, i+d/2): rotate_half in PyTorch code, this app's decoder")
    pairs_with: str = N_("dim {a} pairs with dim {b}")
    pairing_title: str = N_("Two ways to pair {d} dimensions (same colour = rotated together)")
    q_before: str = N_("q before RoPE")
    k_before: str = N_("k before RoPE")
    q_rotated: str = N_("q rotated to position {m}")
    k_rotated: str = N_("k rotated to position {n}")
    vector_hover: str = N_("{name}<br>pair %{customdata[0]:.0f}<br>length %{customdata[1]:.3f}<br>angle "
                           "%{customdata[2]:.1f}°")
    without_rope_sum: str = N_("without RoPE (sum {sum})")
    with_rope_sum: str = N_("with RoPE (sum {sum})")
    plain_share_hover: str = N_("pair %{x} (λ %{customdata})<br>q·k share %{y:.4f}")
    rot_share_hover: str = N_("pair %{x} (λ %{customdata})<br>q_rot·k_rot share %{y:.4f}")
    pair_index_speed: str = N_("pair index i (fast → slow)")
    contribution: str = N_("contribution to q·k")
    contribution_title: str = N_("Per-pair contributions: sum {sum} = score × √{d} = {score} × {root}")
    shift_hover: str = N_("shift %{x}<br>score %{y:.6f}")
    shift_axis: str = N_("shift s (q at m+s, k at n+s)")
    score_axis: str = N_("score q_rot·k_rot/√d")
    aligned_name: str = N_("if every pair started aligned")
    aligned: str = N_("aligned")
    this_pair: str = N_("this q and k")
    distance_hover: str = N_("Δ = m−n = %{x}<br>score %{y:.4f}")
    actual_distance: str = N_("actual m−n = {d}")
    distance_axis: str = N_("distance m − n (tokens)")
    weight_hover: str = N_("query %{y}<br>key %{x}<br>weight %{z:.3f}")
    key: str = N_("key")
    query: str = N_("query")
    weight: str = N_("weight")
    with_rope: str = N_("with RoPE")
    rope_off: str = N_("RoPE off")


WORDS = Words()


def _fmt_tokens(x: float) -> str:
    """A token count or wavelength readable at a glance: 6.28, 62.8, 628, 6.28 k, 1.2 M."""
    return format_si(x, digits=3, prefixes=SI)


# --------------------------------------------------------------------------------------------- sinusoidal PE

def pe_heatmap(pe: np.ndarray, positions: np.ndarray, dims: np.ndarray, base: float, height: int = 460,
               words: Words = WORDS) -> go.Figure:
    """PE values [len(positions), len(dims)] as a heatmap: position down, dimension across, diverging colours."""
    fig = go.Figure(go.Heatmap(
        z=pe.astype(np.float32), x=dims, y=positions, colorscale=DIVERGING_SCALE, zmin=-1, zmax=1,
        colorbar=dict(title="PE", thickness=14),
        hovertemplate=words.pe_hover + "<extra></extra>"))
    fig.update_yaxes(title=words.position_p, autorange="reversed")
    fig.update_xaxes(title=words.dimension_axis)
    return apply_theme(fig, fill(words.pe_title, base=f"{base:g}", positions=len(positions), dims=len(dims)), height)


def pe_waves(positions: np.ndarray, pe_columns: np.ndarray, dims, d_model: int, base: float,
             height: int | None = None, words: Words = WORDS) -> go.Figure:
    """Chosen dimensions of PE as curves over position, stacked, each labelled with its wavelength.

    pe_columns: [len(dims), len(positions)]. Dimension j uses pair i = j // 2, wavelength 2*pi*base^(2i/d).
    """
    dims = list(dims)
    fig = go.Figure()
    tickvals, ticktext = [], []
    offsets = -2.6 * np.arange(len(dims))
    base_x = np.tile([positions[0], positions[-1], np.nan], len(dims))
    base_y = np.repeat(offsets, 3)
    fig.add_trace(go.Scatter(x=base_x, y=base_y, mode="lines", line=dict(color="#bbbbbb", width=1),
                             hoverinfo="skip", showlegend=False))
    for row, j in enumerate(dims):
        offset = offsets[row]
        i = j // 2
        lam = 2 * np.pi * base ** (2 * i / d_model)
        kind = "sin" if j % 2 == 0 else "cos"
        fig.add_trace(go.Scatter(
            x=positions, y=pe_columns[row] + offset, mode="lines", name=fill(words.dim, dim=j),
            line=dict(color=PALETTE[row % len(PALETTE)], width=2.5), customdata=pe_columns[row],
            hovertemplate=fill(words.wave_hover, dim=j, kind=kind) + "<extra></extra>"))
        tickvals.append(offset)
        ticktext.append(fill(words.wave_tick, dim=j, kind=kind, pair=i, wavelength=_fmt_tokens(lam)))
    fig.update_yaxes(tickvals=tickvals, ticktext=ticktext, zeroline=False, showgrid=False)
    fig.update_xaxes(title=words.position_p)
    fig.update_layout(showlegend=False)
    return apply_theme(fig, words.waves_title,
                       height or 130 + 95 * len(dims))


def pe_offset_dot_figure(offsets: np.ndarray, dots: np.ndarray, starts, height: int = 380,
                         words: Words = WORDS) -> go.Figure:
    """PE(p)·PE(p+k) over k, one curve per start p (they lie on top of each other: only k matters)."""
    fig = go.Figure()
    styles = [("#9ecae1", 9), (PALETTE[1], 4.5), ("#222222", 1.5)]   # wide to thin: all three stay visible
    for row, p in enumerate(starts):
        color, width = styles[row % len(styles)]
        fig.add_trace(go.Scatter(
            x=offsets, y=dots[row], mode="lines", name=f"p = {p}", line=dict(color=color, width=width),
            hovertemplate=f"p = {p}<br>k = %{{x}}<br>PE(p)·PE(p+k) = %{{y:.3f}}<extra></extra>"))
    fig.update_xaxes(title=words.offset_k)
    fig.update_yaxes(title="PE(p) · PE(p+k)")
    fig.update_layout(legend=dict(x=1, xanchor="right", y=1, yanchor="top", bgcolor="rgba(255,255,255,0.8)"))
    return apply_theme(fig, words.offset_title, height)


SIMILARITY_MARGIN = dict(l=80, r=90, t=60, b=70)   # room for the axis titles, tick labels and the colour bar


def pe_similarity_figure(sim: np.ndarray, positions: np.ndarray, size: int = 480, words: Words = WORDS) -> go.Figure:
    """PE(p)·PE(q) for all shown position pairs: a Toeplitz matrix (constant along each diagonal).

    A fixed size x ~size figure whose margins leave a square plot area, so the colour bar (as tall as the plot
    area) matches the heatmap; show it at width=size, not stretched."""
    vmax = float(np.abs(sim).max()) or 1.0
    m = SIMILARITY_MARGIN
    side = size - m["l"] - m["r"]                                    # the square plot area
    fig = go.Figure(go.Heatmap(
        z=sim.astype(np.float32), x=positions, y=positions, colorscale=DIVERGING_SCALE, zmin=-vmax, zmax=vmax,
        colorbar=dict(title=dict(text=words.dot, side="right"), thickness=14, len=1, lenmode="fraction", ypad=0),
        hovertemplate="p = %{y}<br>q = %{x}<br>PE(p)·PE(q) = %{z:.2f}<extra></extra>"))
    fig.update_yaxes(title=words.position_p, autorange="reversed", scaleanchor="x", constrain="domain")
    fig.update_xaxes(title=words.position_q, constrain="domain")
    apply_theme(fig, words.similarity_title, side + m["t"] + m["b"])
    fig.update_layout(width=size, margin=m)
    return fig


# --------------------------------------------------------------------------------------------- RoPE theory

def rope_frequency_figure(frequencies: dict[str, np.ndarray], context_length: int | None = None,
                          highlight: str | None = None, height: int = 420, words: Words = WORDS) -> go.Figure:
    """theta_i over pair index i (log) and the wavelength 2*pi/theta_i in tokens (log), one line per base."""
    traces = []
    for row, (label, freqs) in enumerate(frequencies.items()):
        i = np.arange(len(freqs))
        is_hi = label == highlight
        style = dict(color=PALETTE[row % len(PALETTE)], width=4 if is_hi else 2, dash="solid" if is_hi else "dash")
        traces.append(go.Scatter(x=i, y=freqs, mode="lines", name=label, line=style, legendgroup=label,
                                 hovertemplate=f"{words.theta_hover}<extra>{label}</extra>"))
        traces.append(go.Scatter(x=i, y=2 * np.pi / freqs, mode="lines", name=label, line=style, legendgroup=label,
                                 showlegend=False, xaxis="x2", yaxis="y2",
                                 hovertemplate=f"{words.lambda_hover}<extra>{label}</extra>"))
    annotations, shapes = [], []
    if context_length:
        shapes.append(dict(type="line", xref="x2 domain", x0=0, x1=1, yref="y2", y0=context_length,
                           y1=context_length, line=dict(color=ACCENT, dash="dot")))
        annotations.append(dict(x=0, y=np.log10(context_length), xref="x2", yref="y2", yanchor="bottom",
                                xanchor="left", text=fill(words.context, n=f"{context_length:,}"), showarrow=False,
                                font=dict(color=ACCENT)))
    axis = dict(type="log", exponentformat="power")
    fig = go.Figure(traces, layout=dict(
        xaxis=dict(domain=[0, 0.42], title=words.pair_index), yaxis=dict(axis, title=words.theta_axis),
        xaxis2=dict(domain=[0.58, 1], title=words.pair_index, anchor="y2"),
        yaxis2=dict(axis, anchor="x2", title=words.lambda_axis),
        annotations=annotations, shapes=shapes, legend=dict(orientation="h", yanchor="bottom", y=1.12, x=0)))
    return apply_theme(fig, None, height)


def rotation_figure(path: np.ndarray, pair: int, theta: float, height: int = 460, words: Words = WORDS) -> go.Figure:
    """One 2-D vector after RoPE at positions 0..n-1 (path [n, 2]): dots coloured by position."""
    n = len(path)
    circle = np.linspace(0, 2 * np.pi, 181)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines", hoverinfo="skip",
                             line=dict(color="#cccccc", width=1), showlegend=False))
    fig.add_trace(go.Scatter(
        x=path[:, 0], y=path[:, 1], mode="markers", showlegend=False,
        marker=dict(size=9, color=np.arange(n), colorscale=ATTENTION_SCALE,
                    colorbar=dict(title=dict(text=words.position, side="top"), thickness=10, len=0.7)),
        hovertemplate=words.angle_hover + "<extra></extra>",
        text=[f"{(m * theta) % (2 * np.pi):.3f} rad" for m in range(n)]))
    ends = ((0, Q_LIGHT, fill(words.position_n, n=0)), (n - 1, ACCENT, fill(words.position_n, n=n - 1)))
    for m, color, label in ends:
        fig.add_trace(go.Scatter(x=[0, path[m, 0]], y=[0, path[m, 1]], mode="lines+markers", name=label,
                                 showlegend=False, hovertemplate=label + "<extra></extra>",
                                 line=dict(color=color, width=4),
                                 marker=dict(symbol="arrow", angleref="previous", size=[0, 18], color=color)))
    turns = (n - 1) * theta / (2 * np.pi)
    fig.update_xaxes(range=[-1.25, 1.25], zeroline=True, showgrid=False, title=words.first_coordinate,
                     constrain="domain")
    fig.update_yaxes(range=[-1.25, 1.25], scaleanchor="x", zeroline=True, showgrid=False,
                     title=words.second_coordinate, constrain="domain")
    lam = 2 * np.pi / theta
    apply_theme(fig, fill(words.rotation_title, pair=pair, theta=f"{theta:.3g}", wavelength=_fmt_tokens(lam),
                          turns=f"{turns:,.2f}", last=n - 1), height)
    fig.update_layout(margin=dict(t=90))
    return fig


def pairing_diagram(d: int = 8, height: int = 300, words: Words = WORDS) -> go.Figure:
    """Which dimensions rotate together, for d dims: adjacent pairs (2i, 2i+1) vs half-split pairs (i, i+d/2)."""
    fig = go.Figure()
    rows = ((words.adjacent, 1.0, [(2 * i, 2 * i + 1) for i in range(d // 2)]),
            (words.half_split, 0.0, [(i, i + d // 2) for i in range(d // 2)]))
    for title, y, pairs in rows:
        colors = {}
        for i, (a, b) in enumerate(pairs):
            colors[a] = colors[b] = PALETTE[i % len(PALETTE)]
            t = np.linspace(0, np.pi, 40)
            mid, half = (a + b) / 2, (b - a) / 2
            fig.add_trace(go.Scatter(x=mid - half * np.cos(t), y=y + 0.14 + 0.09 * (1 + half) * np.sin(t) / 2,
                                     mode="lines", line=dict(color=PALETTE[i % len(PALETTE)], width=3),
                                     showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(
            x=np.arange(d), y=np.full(d, y), mode="markers+text", showlegend=False,
            marker=dict(symbol="square", size=34, color=[colors[j] for j in range(d)], line=dict(color="white")),
            text=[f"x{j}" for j in range(d)], textfont=dict(color="white", size=14),
            hovertext=[fill(words.pairs_with, a=j, b=next(b if a == j else a for a, b in pairs if j in (a, b)))
                       for j in range(d)], hoverinfo="text"))
        fig.add_annotation(x=-0.6, y=y - 0.22, text=title, showarrow=False, xanchor="left",
                           font=dict(size=TICK_FONT_SIZE + 1))
    fig.update_xaxes(visible=False, range=[-0.7, d - 0.3])
    fig.update_yaxes(visible=False, range=[-0.35, 1.3])
    return apply_theme(fig, fill(words.pairing_title, d=d), height)


# --------------------------------------------------------------------------------------------- RoPE on the model

def rope_pairs_figure(q_pairs: np.ndarray, q_rot_pairs: np.ndarray, k_pairs: np.ndarray, k_rot_pairs: np.ndarray,
                      pair_ids, thetas: np.ndarray, m: int, n: int, n_cols: int = 8,
                      height: int | None = None, words: Words = WORDS) -> go.Figure:
    """Small multiples, one cell per pair: q and k as arrows before (pale, dashed) and after RoPE (solid).

    *_pairs: [P, 2] (first, second coordinate) for the pairs in pair_ids; thetas: [P] rad/token. Each cell is
    scaled to its longest arrow so slow and fast pairs are equally visible (hover gives the true lengths).
    """
    pair_ids = list(pair_ids)
    n_rows = -(-len(pair_ids) // n_cols)
    scale = np.maximum(np.linalg.norm(np.concatenate([q_pairs, k_pairs], axis=-1).reshape(-1, 2, 2), axis=-1)
                       .max(-1), 1e-12)                                                      # [P]
    centers = np.array([(c % n_cols * 2.4, -(c // n_cols) * 3.0) for c in range(len(pair_ids))])  # [P, 2]
    circle = np.linspace(0, 2 * np.pi, 49)
    ring_x, ring_y, label_x, label_y, labels = [], [], [], [], []
    for (cx, cy), i, th in zip(centers, pair_ids, thetas, strict=True):
        ring_x += list(cx + np.cos(circle)) + [None]
        ring_y += list(cy + np.sin(circle)) + [None]
        label_x.append(cx)
        label_y.append(cy + 1.32)
        labels.append(f"<b>{i}</b> λ {_fmt_tokens(2 * np.pi / th)}")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ring_x, y=ring_y, mode="lines", line=dict(color="#dddddd", width=1),
                             hoverinfo="skip", showlegend=False))
    vectors = ((q_pairs, Q_LIGHT, "dash", words.q_before), (k_pairs, K_LIGHT, "dash", words.k_before),
               (q_rot_pairs, Q_COLOR, "solid", fill(words.q_rotated, m=m)),
               (k_rot_pairs, K_COLOR, "solid", fill(words.k_rotated, n=n)))
    for vec, color, dash, name in vectors:
        tips = centers + vec / scale[:, None] * 0.95                                          # [P, 2]
        xs = np.stack([centers[:, 0], tips[:, 0], np.full(len(tips), np.nan)], -1).reshape(-1)
        ys = np.stack([centers[:, 1], tips[:, 1], np.full(len(tips), np.nan)], -1).reshape(-1)
        sizes = np.tile([0, 13, 0], len(tips))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", line=dict(color=color, width=3, dash=dash),
                                 marker=dict(symbol="arrow", angleref="previous", size=sizes, color=color),
                                 name=name, legendgroup=name, hoverinfo="skip"))
        norms = np.linalg.norm(vec, axis=-1)
        angles = np.degrees(np.arctan2(vec[:, 1], vec[:, 0]))
        fig.add_trace(go.Scatter(
            x=tips[:, 0], y=tips[:, 1], mode="markers", legendgroup=name, showlegend=False,
            marker=dict(size=14, color=color, opacity=0),
            customdata=np.stack([pair_ids, norms, angles], -1),
            hovertemplate=fill(words.vector_hover, name=name) + "<extra></extra>"))
    fig.add_trace(go.Scatter(x=label_x, y=label_y, mode="text", text=labels, hoverinfo="skip", showlegend=False,
                             textfont=dict(size=TICK_FONT_SIZE - 1)))
    fig.update_xaxes(visible=False, range=[-1.3, (n_cols - 1) * 2.4 + 1.3])
    fig.update_yaxes(visible=False, scaleanchor="x", range=[-(n_rows - 1) * 3.0 - 1.1, 1.6])
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return apply_theme(fig, None, height or 80 + 100 * n_rows)


def pair_contribution_figure(contrib_rot: np.ndarray, contrib_plain: np.ndarray, thetas: np.ndarray,
                             score: float, head_dim: int, height: int = 400, words: Words = WORDS) -> go.Figure:
    """Each pair's share of q_rot·k_rot (bars) and, for contrast, of q·k without rotation (outlined bars)."""
    i = np.arange(len(contrib_rot))
    lam = [_fmt_tokens(2 * np.pi / t) for t in thetas]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=i, y=contrib_plain, name=fill(words.without_rope_sum, sum=f"{contrib_plain.sum():.3f}"),
                         marker=dict(color="rgba(0,0,0,0)", line=dict(color="#555555", width=1.5)),
                         customdata=lam,
                         hovertemplate=words.plain_share_hover + "<extra></extra>"))
    fig.add_trace(go.Bar(x=i, y=contrib_rot, name=fill(words.with_rope_sum, sum=f"{contrib_rot.sum():.4f}"),
                         marker=dict(color=np.where(contrib_rot >= 0, Q_COLOR, ACCENT)), customdata=lam,
                         hovertemplate=words.rot_share_hover + "<extra></extra>"))
    fig.update_layout(barmode="overlay", legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    fig.update_xaxes(title=words.pair_index_speed)
    fig.update_yaxes(title=words.contribution)
    title = fill(words.contribution_title, sum=f"{contrib_rot.sum():.4f}", d=head_dim, score=f"{score:.4f}",
                 root=f"{np.sqrt(head_dim):g}")
    return apply_theme(fig, title, height)


def shift_figure(shifts: np.ndarray, curves: dict[str, np.ndarray], height: int = 380,
                 words: Words = WORDS) -> go.Figure:
    """Score of the same q/k content shifted together by s, one line per distance m−n: flat lines."""
    fig = go.Figure()
    for row, (label, y) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(x=shifts, y=y, mode="lines", name=label,
                                 line=dict(color=PALETTE[row % len(PALETTE)], width=3),
                                 hovertemplate=f"{words.shift_hover}<extra>{label}</extra>"))
    fig.update_xaxes(title=words.shift_axis)
    fig.update_yaxes(title=words.score_axis)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return apply_theme(fig, None, height)


def distance_figure(distances: np.ndarray, scores: np.ndarray, envelope: np.ndarray, current: int | None = None,
                    height: int = 400, words: Words = WORDS) -> go.Figure:
    """Score of one real q/k pair as the distance m−n grows, and the all-pairs-aligned decay curve."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=distances, y=envelope, mode="lines", name=words.aligned_name,
                             line=dict(color="#999999", width=2, dash="dot"),
                             hovertemplate=f"Δ %{{x}}<br>%{{y:.3f}}<extra>{words.aligned}</extra>"))
    fig.add_trace(go.Scatter(x=distances, y=scores, mode="lines", name=words.this_pair,
                             line=dict(color=Q_COLOR, width=1.5),
                             hovertemplate=words.distance_hover + "<extra></extra>"))
    if current is not None and 0 <= current <= distances[-1]:
        fig.update_layout(
            shapes=[dict(type="line", x0=current, x1=current, yref="paper", y0=0, y1=1,
                         line=dict(color=ACCENT, dash="dash"))],
            annotations=[dict(x=current, y=1, yref="paper", text=" " + fill(words.actual_distance, d=current),
                              showarrow=False, xanchor="left", yanchor="top", font=dict(color=ACCENT))])
    fig.update_xaxes(title=words.distance_axis)
    fig.update_yaxes(title=words.score_axis)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return apply_theme(fig, None, height)


def pattern_pair_figure(with_rope: np.ndarray, without_rope: np.ndarray, tokens: list[str], query: int | None = None,
                        height: int = 540, words: Words = WORDS) -> go.Figure:
    """One head's attention pattern with RoPE and with RoPE switched off, side by side, one colour scale.

    Patterns are [T, T] with NaN where nothing is shown (future keys; with the sink hidden, key 0 and rows 0-1),
    drawn as the grey background (MASKED_COLOR). Token axes are positions with the tokens as tick text.
    """
    shown = np.concatenate([with_rope[np.isfinite(with_rope)], without_rope[np.isfinite(without_rope)]])
    zmax = float(shown.max()) if shown.size and shown.max() > 0 else 1.0
    positions = np.arange(len(tokens))
    hover = words.weight_hover + "<extra></extra>"
    traces = [go.Heatmap(z=np.asarray(pat, dtype=np.float32), x=positions, y=positions, coloraxis="coloraxis",
                         hoverongaps=False, hovertemplate=hover, xaxis=xa, yaxis=ya)
              for pat, xa, ya in ((with_rope, "x", "y"), (without_rope, "x2", "y2"))]
    xaxis = dict(position_axis(tokens, max_labels=12, max_chars=8), tickangle=-60, title=words.key, showgrid=False,
                 zeroline=False)
    yaxis = dict(position_axis(tokens, max_labels=40, max_chars=9), autorange="reversed", showgrid=False,
                 zeroline=False)
    yaxis.pop("range")
    shapes = [] if query is None else [
        dict(type="line", xref=f"{xa} domain", x0=0, x1=1, yref=ya, y0=query, y1=query,
             line=dict(color=ACCENT, width=1.5, dash="dot")) for xa, ya in (("x", "y"), ("x2", "y2"))]
    small = dict(size=TICK_FONT_SIZE + 1)
    fig = go.Figure(traces, layout=dict(
        xaxis=dict(xaxis, domain=[0, 0.475]), xaxis2=dict(xaxis, domain=[0.525, 1], anchor="y2"),
        yaxis=dict(yaxis, title=words.query), yaxis2=dict(yaxis, anchor="x2", matches="y", showticklabels=False),
        shapes=shapes, plot_bgcolor=MASKED_COLOR,
        coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0, cmax=zmax,
                       colorbar=dict(title=dict(text=words.weight, side="top"), thickness=10, xpad=6)),
        annotations=[dict(text=f"<b>{words.with_rope}</b>", x=0.2375, y=1.0, xref="paper", yref="paper",
                          yanchor="bottom", showarrow=False, font=small),
                     dict(text=f"<b>{words.rope_off}</b>", x=0.7625, y=1.0, xref="paper", yref="paper",
                          yanchor="bottom", showarrow=False, font=small)]))
    return apply_theme(fig, None, height)


def learned_similarity_figure(sim: np.ndarray, positions: np.ndarray, size: int = 480,
                              words: Words = WORDS) -> go.Figure:
    """cos(P[p], P[q]) of a learned position table for all shown pairs (pe_similarity_figure's square layout)."""
    fig = pe_similarity_figure(sim, positions, size, words)
    fig.update_traces(colorbar_title_text=words.cosine, zmin=-1.0, zmax=1.0,
                      hovertemplate="p = %{y}<br>q = %{x}<br>cos = %{z:.3f}<extra></extra>")
    fig.update_layout(title_text=words.learned_similarity_title)
    return fig


def principal_waves_figure(positions: np.ndarray, waves: np.ndarray, explained: np.ndarray, height: int = 320,
                           words: Words = WORDS) -> go.Figure:
    """Each position's coordinate on the leading principal components of a learned position table: one line per
    component, named with the share of the variance it explains."""
    fig = go.Figure()
    for i, (wave, share) in enumerate(zip(waves, explained, strict=True)):
        fig.add_trace(go.Scatter(x=positions, y=wave, mode="lines", line=dict(color=PALETTE[i % len(PALETTE)]),
                                 name=fill(words.component, i=i + 1, share=f"{share:.0%}")))
    fig.update_xaxes(title_text=words.position)
    fig.update_yaxes(title_text=words.coordinate, zeroline=True, zerolinecolor="#999999")
    apply_theme(fig, words.components_title, height)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
