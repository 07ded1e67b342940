"""Figures for the Train page: loss curves with the phase change, gradient norms per layer, per-head measurements
over training, and every head's attention pattern. Pure: numpy arrays and already-translated words in, plotly out.
Runs being compared are told apart by line dash (solid: the first run, dashed: the second)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz.labels import plotly_escape
from viz.text import N_, fill
from viz.theme import ATTENTION_SCALE, MASKED_COLOR, PALETTE, apply_theme

DASHES = ("solid", "dash")
MAX_HEAD_LINES = 48             # every head of the largest model (6 layers x 8 heads)


@dataclass(frozen=True)
class Words:
    """What the training figures write (English defaults; pages pass them translated)."""

    step: str = N_("step")
    loss: str = N_("loss (nats)")
    held_out: str = N_("held-out")
    training: str = N_("training")
    uniform: str = N_("uniform guess: {value} nats")
    phase_change: str = N_("phase change")
    grad_norm: str = N_("gradient norm")
    layer_n: str = N_("layer {layer}")
    head_n: str = N_("L{layer} H{head}")
    pattern_title: str = N_("layer {layer} · head {head}")
    key_label: str = N_("head {head} · key {position} {token}")
    query_label: str = N_("layer {layer} · query {position} {token}")
    pattern_hover: str = N_("%{y}<br>%{x}<br>weight %{z:.3f}")
    step_hover: str = N_("step %{x}<br>%{y:.3f}")


WORDS = Words()


@dataclass(frozen=True)
class Curves:
    """One run's logged measurements as the figures read them. name: the run's label in legends ('' alone)."""

    name: str
    steps: np.ndarray                   # [n]
    train_loss: np.ndarray              # [n]
    eval_loss: np.ndarray               # [n]
    layer_grad_norms: np.ndarray        # [n, L]
    phase_step: int | None = None


def _named(run_name: str, what: str) -> str:
    return f"{run_name}: {what}" if run_name else what


def _lines_layout(total_steps: int, y_title: str, words: Words, **yaxis) -> dict:
    return dict(xaxis=dict(title=dict(text=words.step), range=[0, max(1, total_steps)]),
                yaxis=dict(title=dict(text=y_title), **yaxis),
                legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0))


def _line(x, y, name: str, colour: str, hover: str, dash: str = "solid", width: float = 2.0, **more) -> dict:
    return dict(type="scatter", x=x, y=y, mode="lines", name=name, line=dict(color=colour, dash=dash, width=width),
                hovertemplate=hover + "<extra></extra>", **more)


def loss_figure(runs: list[Curves], total_steps: int, uniform: float, *, title: str | None = None,
                height: int = 300, words: Words = WORDS) -> go.Figure:
    """Held-out loss (solid / dashed per run) and training loss (dotted, fainter) against the step; the uniform
    guess as a grey line; each run's phase change as a vertical line. The x axis spans the whole run from the
    start, so it does not move while training. Built in one go (plotly validates every added trace again)."""
    data, shapes, notes = [], [], []
    top = uniform
    for i, run in enumerate(runs):
        colour = PALETTE[i % len(PALETTE)]
        data.append(_line(run.steps, run.eval_loss, _named(run.name, words.held_out), colour, words.step_hover,
                          width=3))
        data.append(_line(run.steps, run.train_loss, _named(run.name, words.training), colour, words.step_hover,
                          dash="dot", width=1.5, opacity=0.6))
        values = np.concatenate([run.eval_loss, run.train_loss])
        top = max(top, float(values[np.isfinite(values)].max(initial=0.0)))
        if run.phase_step is not None:
            shapes.append(dict(type="line", xref="x", yref="paper", x0=run.phase_step, x1=run.phase_step, y0=0, y1=1,
                               line=dict(color=colour, width=1.5, dash="dashdot")))
            notes.append(dict(xref="x", yref="paper", x=run.phase_step, y=1 - 0.08 * i, xanchor="left",
                              showarrow=False, text=_named(run.name, words.phase_change), font=dict(color=colour)))
    shapes.append(dict(type="line", xref="paper", yref="y", x0=0, x1=1, y0=uniform, y1=uniform,
                       line=dict(color=MASKED_COLOR, width=2, dash="dash")))
    # At the right end, under the line: every run starts near the uniform guess at the left (the label sat on the
    # curves there) and has fallen below it by the end; the phase-change labels sit at the top.
    notes.append(dict(xref="paper", yref="y", x=1, y=uniform, xanchor="right", yanchor="top", showarrow=False,
                      text=fill(words.uniform, value=f"{uniform:.2f}"), font=dict(color="#7f7f7f")))
    layout = _lines_layout(total_steps, words.loss, words, range=[0, top * 1.08])
    fig = go.Figure(data=data, layout=dict(shapes=shapes, annotations=notes, **layout))
    return apply_theme(fig, title, height)


def grad_norm_figure(runs: list[Curves], total_steps: int, *, title: str | None = None, height: int = 280,
                     words: Words = WORDS) -> go.Figure:
    """Every layer's gradient norm (before clipping) against the step, log scale: one colour per layer, one dash
    per run."""
    data = [_line(run.steps, np.asarray(run.layer_grad_norms, dtype=np.float64)[:, layer],
                  _named(run.name, fill(words.layer_n, layer=layer)), PALETTE[layer % len(PALETTE)],
                  words.step_hover, dash=DASHES[r % 2])
            for r, run in enumerate(runs) for layer in range(np.shape(run.layer_grad_norms)[1])]
    norms = np.concatenate([np.ravel(run.layer_grad_norms) for run in runs]) if runs else np.zeros(0)
    ticks = log_ticks(norms[np.isfinite(norms) & (norms > 0)])
    fig = go.Figure(data=data, layout=_lines_layout(total_steps, words.grad_norm, words, type="log", tickmode="array",
                                                    tickvals=ticks, ticktext=[f"{t:g}" for t in ticks]))
    return apply_theme(fig, title, height)


def log_ticks(values: np.ndarray) -> list[float]:
    """1, 2 and 5 times each power of ten from the decade below the smallest value to the one above the largest: a
    short log axis's ticks, all at the axis font (plotly labelled all nine digits of a short decade on top of each
    other, or with "D2" drew the 2 and 5 smaller than the presenter's 14 px)."""
    if not values.size:
        return [1.0]
    low, high = int(np.floor(np.log10(values.min()))), int(np.ceil(np.log10(values.max())))
    return [m * 10.0 ** e for e in range(low, high + 1) for m in (1, 2, 5) if m * 10.0 ** e <= 10.0 ** high]


def head_lines_figure(runs: list[tuple[str, np.ndarray, np.ndarray]], total_steps: int, y_title: str, *,
                      y_range: tuple[float, float] | None = None, title: str | None = None, height: int = 280,
                      words: Words = WORDS) -> go.Figure:
    """One line per head over training (runs: (name, steps [n], values [n, L, H])): one colour per head (layer by
    layer), one dash per run."""
    data = []
    for r, (name, steps, values) in enumerate(runs):
        v = np.asarray(values, dtype=np.float64)
        H = v.shape[2]
        for k in range(min(v.shape[1] * H, MAX_HEAD_LINES)):
            layer, head = divmod(k, H)
            data.append(_line(steps, v[:, layer, head], _named(name, fill(words.head_n, layer=layer, head=head)),
                              PALETTE[k % len(PALETTE)], words.step_hover, dash=DASHES[r % 2]))
    layout = _lines_layout(total_steps, y_title, words, **({"range": list(y_range)} if y_range else {}))
    # a line per head: the legend wraps to several rows in a half-width chart, and above the plot it covered the
    # title; below the axis, plotly widens the bottom margin for it
    layout["legend"] = dict(orientation="h", yanchor="top", y=-0.5, xanchor="left", x=0)    # below the axis title
    return apply_theme(go.Figure(data=data, layout=layout), title, height)


def patterns_figure(patterns: np.ndarray, tokens: list[str], *, title: str | None = None, cell_px: int = 190,
                    words: Words = WORDS) -> go.Figure:
    """Every head's attention on one example as one tiled heatmap (rows of tiles: layers, columns: heads), one
    colour scale from 0 to 1, the future (above each diagonal) blank, white lines between tiles. One trace whose
    axes are categories naming layer / head and token, so the hover says which cell it is without per-cell data:
    quick to build, send and draw. patterns [L, H, T, T], tokens: the example's T labels."""
    p = np.asarray(patterns, dtype=np.float32)
    L, H, T, _ = p.shape
    if len(tokens) != T:
        raise ValueError(f"one token label per position: {len(tokens)} labels for {T} positions")
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    z = np.where(future, np.nan, p).transpose(0, 2, 1, 3).reshape(L * T, H * T)         # [L*T, H*T]
    shown = [plotly_escape(t) for t in tokens]
    x = [fill(words.key_label, head=h, position=j, token=shown[j]) for h in range(H) for j in range(T)]
    y = [fill(words.query_label, layer=layer, position=i, token=shown[i]) for layer in range(L) for i in range(T)]
    lines = [dict(type="line", xref="x", yref="paper", x0=h * T - 0.5, x1=h * T - 0.5, y0=0, y1=1,
                  line=dict(color="white", width=6)) for h in range(1, H)]
    lines += [dict(type="line", xref="paper", yref="y", x0=0, x1=1, y0=layer * T - 0.5, y1=layer * T - 0.5,
                   line=dict(color="white", width=6)) for layer in range(1, L)]
    notes = [dict(x=h * T + (T - 1) / 2, y=layer * T - 0.5, xref="x", yref="y", yanchor="bottom", showarrow=False,
                  text=fill(words.pattern_title, layer=layer, head=h), font=dict(size=13))
             for layer in range(L) for h in range(H)]
    heatmap = dict(type="heatmap", z=z, x=x, y=y, zmin=0.0, zmax=1.0, colorscale=ATTENTION_SCALE,
                   hoverongaps=False, colorbar=dict(thickness=12, len=0.8),
                   hovertemplate=words.pattern_hover + "<extra></extra>")
    axis = dict(type="category", showticklabels=False, showgrid=False, zeroline=False)
    layout = dict(shapes=lines, annotations=notes, xaxis=dict(**axis), yaxis=dict(autorange="reversed", **axis),
                  plot_bgcolor="white")
    return apply_theme(go.Figure(data=[heatmap], layout=layout), title, cell_px * L + (70 if title else 40))
