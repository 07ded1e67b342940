"""Figures for the softmax & temperature page: probability bars, curves over temperature, sampling histogram.

Rows are numeric positions with the (escaped) labels as tick text: token strings are not unique, and a token such
as "8" must not turn the axis numeric. One percentage format per chart. Pure plotly: no streamlit, no torch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.format import percent_labels, percent_tickformat, probability_axis
from viz.labels import plotly_escape, row_axis
from viz.text import N_, fill
from viz.theme import ACCENT, MASKED_COLOR, PALETTE, apply_theme

KEPT_COLOR = PALETTE[0]
SAMPLED_COLOR = PALETTE[1]


@dataclass(frozen=True)
class Words:
    """What the softmax figures write (English defaults; pages pass them translated)."""

    kept: str = N_("kept")
    dropped: str = N_("dropped by top-k / top-p")
    probability: str = N_("probability")
    bar_hover: str = N_("%{customdata[0]}<br>p = %{x:.4f}<br>%{customdata[1]}<br>after renormalizing: "
                        "%{customdata[2]:.4f}")
    kept_renormalized: str = N_("kept, renormalized")
    renormalized_hover: str = N_("renormalized: %{x:.4f}")
    entropy: str = N_("entropy (bits)")
    top1: str = N_("top-1 probability")
    effective: str = N_("effective choices (2^H)")
    effective_short: str = N_("effective choices")
    current_hover: str = N_("current T = %{x:.3g}")
    temperature: str = N_("temperature T")
    expected: str = N_("expected probability")
    expected_hover: str = N_("%{customdata}<br>expected: %{x:.4f}")
    share_of_samples: str = N_("share of {n} samples")
    sampled_hover: str = N_("%{customdata[0]}<br>sampled %{customdata[1]} times: %{x:.4f}")
    frequency_axis: str = N_("probability / frequency")


WORDS = Words()


def _rows(labels: list[str], values, name: str) -> tuple[list[str], np.ndarray]:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(labels) != len(v):
        raise ValueError(f"{name}: {len(labels)} labels for {len(v)} values")
    return list(labels), v


def _label_axis(fig: go.Figure, labels: list[str], **kw) -> None:
    fig.update_yaxes(**row_axis(labels, max_chars=22), **kw)


def probability_bars(labels: list[str], probs, *, keep=None, renormalized=None, title: str | None = None,
                     height: int | None = None, words: Words = WORDS) -> go.Figure:
    """Horizontal bars of probabilities, in the given order (top row first).

    keep: bool per row; kept rows are blue, the rest grey (dropped by top-k / top-p).
    renormalized: per row, the probability after dropping the others and renormalizing (shown in the hover and as
    a marker outline on kept rows).
    """
    labels, p = _rows(labels, probs, "probs")
    n = len(labels)
    keep = np.ones(n, dtype=bool) if keep is None else np.asarray(keep, dtype=bool).reshape(-1)
    if keep.shape != (n,):
        raise ValueError(f"keep must have {n} entries, got {keep.shape}")
    renorm = p if renormalized is None else np.asarray(renormalized, dtype=np.float64).reshape(-1)
    status = np.where(keep, words.kept, words.dropped)
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=p, y=np.arange(n), orientation="h", name="probability",
        marker=dict(color=np.where(keep, KEPT_COLOR, MASKED_COLOR).tolist(), line=dict(width=0)),
        text=percent_labels(p), textposition="outside", cliponaxis=False,
        customdata=np.stack([np.asarray([plotly_escape(s) for s in labels], dtype=object), status, renorm], axis=-1),
        hovertemplate=words.bar_hover + "<extra></extra>"))
    if renormalized is not None and (~keep).any():
        fig.add_trace(go.Scatter(
            x=np.where(keep, renorm, np.nan), y=np.arange(n), mode="markers", name=words.kept_renormalized,
            marker=dict(symbol="line-ns", size=18, line=dict(width=3, color=ACCENT)),
            hovertemplate=words.renormalized_hover + "<extra></extra>"))
        fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0))
    _label_axis(fig, labels, title_text=None)
    top = float(np.nanmax(np.concatenate([p, renorm]))) if n else 1.0
    fig.update_xaxes(title_text=words.probability, nticks=6, **probability_axis(min(1.0, top) * 1.25))
    apply_theme(fig, title=title, height=height or int(min(720, 120 + 26 * max(n, 4))))
    fig.update_layout(showlegend=renormalized is not None and bool((~keep).any()), bargap=0.25)
    return fig


def log_ticks(lo: float, hi: float, mantissas: tuple[int, ...] = (1, 2, 5),
              max_ticks: int = 9) -> list[float]:
    """Tick values m * 10^e (m in mantissas) from lo to hi for a log axis: 0.1, 0.2, 0.5, 1, … instead of
    plotly's bare "5, 2, 5" minor labels. Falls back to 1-3 steps, then powers of ten, above max_ticks values."""
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < lo <= hi, got {lo!r}, {hi!r}")
    for ms in (mantissas, (1, 3), (1,)):
        out = []
        for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1):
            for m in ms:
                v = float(f"{m * 10.0 ** e:.12g}")
                if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                    out.append(v)
        if len(out) <= max_ticks:
            break
    return out


PANEL_GAP = 0.15          # share of the width between two temperature panels (~75 px at 1024 px, ~115 at 1280)


def temperature_curves(temperatures, entropy_bits, top1, effective, current: float, *,
                       current_values: tuple[float, float, float] | None = None, title: str | None = None,
                       height: int = 340, words: Words = WORDS) -> go.Figure:
    """Three panels over a log temperature axis: entropy (bits), top-1 probability, effective number of choices
    (2^entropy), with the current temperature marked by a vertical line and a dot on each curve."""
    t = np.asarray(temperatures, dtype=np.float64).reshape(-1)
    series = [np.asarray(s, dtype=np.float64).reshape(-1) for s in (entropy_bits, top1, effective)]
    if any(s.shape != t.shape for s in series):
        raise ValueError("every curve needs one value per temperature")
    names = [words.entropy, words.top1, words.effective]
    titles = [words.entropy, words.top1, words.effective_short]   # fit a third of a 1024 px page
    # wide gaps: the 2nd and 3rd panels' y tick labels ("100%", "10,000") sit in them, clear of the panel before
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles, horizontal_spacing=PANEL_GAP)
    if current_values is None:
        current_values = tuple(float(np.interp(np.log(current), np.log(t), s)) for s in series)
    fmts = [".2f", ".1%", ".1f"]
    ticks = log_ticks(float(t.min()), float(t.max()), mantissas=(1, 3))   # fits a third of a narrow page
    for c, (s, name, cur, fmt) in enumerate(zip(series, names, current_values, fmts, strict=True), start=1):
        fig.add_trace(go.Scatter(x=t, y=s, mode="lines", line=dict(color=PALETTE[0], width=3), name=name,
                                 hovertemplate=f"T = %{{x:.3g}}<br>{name}: %{{y:{fmt}}}<extra></extra>"),
                      row=1, col=c)
        fig.add_trace(go.Scatter(x=[current], y=[cur], mode="markers", marker=dict(color=ACCENT, size=12),
                                 name=f"T = {current:g}",
                                 hovertemplate=f"{words.current_hover}<br>{name}: %{{y:{fmt}}}<extra></extra>"),
                      row=1, col=c)
        fig.add_vline(x=current, line=dict(color=ACCENT, width=2, dash="dash"), row=1, col=c)
        fig.update_xaxes(type="log", title_text=words.temperature, tickmode="array", tickvals=ticks, tickangle=0,
                         ticktext=[f"{v:g}" for v in ticks], row=1, col=c)
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=1, col=2)
    eff = series[2][np.isfinite(series[2])]
    lo, hi = (float(eff.min()), float(eff.max())) if eff.size else (1.0, 1.0)
    y_ticks = log_ticks(max(lo, 1e-12), max(hi, 1e-12) * 1.0001, max_ticks=6) if hi / max(lo, 1e-12) > 1.5 else None
    fig.update_yaxes(type="log", row=1, col=3, **(dict(tickmode="array", tickvals=y_ticks,
                                                       ticktext=[f"{v:,g}" for v in y_ticks]) if y_ticks else {}))
    apply_theme(fig, title=title, height=height)
    fig.update_layout(showlegend=False)
    fig.update_annotations(font_size=16)
    return fig


def sample_histogram(labels: list[str], expected, observed, n_samples: int, *, title: str | None = None,
                     height: int | None = None, words: Words = WORDS) -> go.Figure:
    """Grouped horizontal bars per row: the expected probability and the share of n_samples draws that hit it."""
    labels, e = _rows(labels, expected, "expected")
    _, o = _rows(labels, observed, "observed")
    n = len(labels)
    fig = go.Figure()
    escaped = [plotly_escape(s) for s in labels]
    fig.add_trace(go.Bar(x=e, y=np.arange(n), orientation="h", name=words.expected,
                         marker_color=KEPT_COLOR, customdata=escaped,
                         hovertemplate=words.expected_hover + "<extra></extra>"))
    counts = np.rint(o * n_samples).astype(int)
    fig.add_trace(go.Bar(x=o, y=np.arange(n), orientation="h", name=fill(words.share_of_samples, n=f"{n_samples:,}"),
                         marker_color=SAMPLED_COLOR, customdata=np.stack([np.asarray(escaped, dtype=object),
                                                                          counts], axis=-1),
                         hovertemplate=words.sampled_hover + "<extra></extra>"))
    _label_axis(fig, labels)
    top = min(1.0, float(max(e.max(initial=0), o.max(initial=0))) * 1.1) or 1.0
    fig.update_xaxes(title_text=words.frequency_axis, range=[0, top], tickformat=percent_tickformat(top),
                     nticks=6)
    apply_theme(fig, title=title, height=height or int(min(760, 140 + 34 * max(n, 3))))
    fig.update_layout(barmode="group", bargap=0.2, bargroupgap=0.05,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0))
    return fig
