"""Figures for the parameter / memory / compute calculator. Plain dicts of ints in, plotly figures out."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.format import format_bytes, format_si
from viz.text import N_, fill
from viz.theme import FONT_SIZE, PALETTE, TICK_FONT_SIZE, TITLE_FONT_SIZE, apply_theme

# One colour per part, used by every figure on the page (so "MLP" is always the same green).
GROUP_COLORS = {
    "embeddings": PALETTE[0],
    "attention": PALETTE[1],
    "mlp": PALETTE[2],
    "norms": PALETTE[7],
    "head": PALETTE[4],
}
GROUP_LABELS = {"embeddings": N_("Embeddings"), "attention": N_("Attention"), "mlp": "MLP", "norms": N_("Norms"),
                "head": N_("LM head")}
DTYPE_COLORS = {"fp32": "#08519c", "bf16": "#3182bd", "int8": "#6baed6", "int4": "#bdd7e7"}
PERCENT_TICKS = [0, 20, 40, 60, 80, 100]
TREEMAP_MIN_TEXT = 12     # px: a box too small for its label at this size shows it on hover only
VARIANT_COLORS = {"MHA": PALETTE[3], "GQA": PALETTE[1], "MQA": PALETTE[8]}


@dataclass(frozen=True)
class Words:
    """What the calculator's figures write (English defaults; pages pass them translated)."""

    model: str = N_("Model")
    embeddings: str = GROUP_LABELS["embeddings"]
    attention: str = GROUP_LABELS["attention"]
    mlp: str = GROUP_LABELS["mlp"]
    norms: str = GROUP_LABELS["norms"]
    head: str = GROUP_LABELS["head"]
    treemap_hover: str = N_("<b>%{label}</b><br>%{value:,} parameters<br>%{percentRoot:.2%} of the model")
    layer_hover: str = N_("%{y}: {group}, %{x:.2f}%<br>(%{customdata:,} parameters of one layer)")
    layer_share: str = N_("share of one layer's parameters")
    weights: str = N_("Weights")
    kv_title: str = N_("KV cache · {n} tokens")
    kv_title_batch: str = N_("KV cache · {n} tokens × batch {batch}")
    weights_hover: str = N_("weights at %{x}: %{y:,} bytes")
    kv_hover: str = N_("KV cache, %{x}: %{y:,} bytes")
    bytes: str = N_("bytes")
    compare_hover: str = N_("%{y}<br>{group}: %{customdata:,} (%{x:.2f}%)")
    all_share: str = N_("share of all parameters")
    matmuls: str = N_("matmuls (2 × weights)")
    matmul_hover: str = N_("matmuls: %{y:.3s} FLOPs")
    attention_flops: str = N_("attention (QKᵀ and AV)")
    attention_hover: str = N_("attention at %{x:,} tokens: %{y:.3s} FLOPs")
    context_axis: str = N_("context length (tokens attended to)")
    flops_axis: str = N_("FLOPs per token")

    def group(self, name: str) -> str:
        """A part's label (embeddings, attention, mlp, norms, head)."""
        return getattr(self, name, name)


WORDS = Words()


def breakdown_treemap(parts: dict[str, dict[str, int]], title: str | None = None, height: int = 460,
                      words: Words = WORDS) -> go.Figure:
    """Treemap of group -> tensor kind -> parameters (e.g. Breakdown.parts()); areas are exact shares of the total."""
    total = sum(sum(leaves.values()) for leaves in parts.values())
    ids, labels, parents, values, colors = ["total"], [words.model], [""], [total], ["#ffffff"]
    texts = [format_si(total, digits=4)]
    for group, leaves in parts.items():
        group_total = sum(leaves.values())
        color = GROUP_COLORS.get(group, PALETTE[9])
        ids.append(group)
        labels.append(words.group(group))
        parents.append("total")
        values.append(group_total)
        colors.append(color)
        texts.append(f"{format_si(group_total, digits=4)} · {100 * group_total / total:.1f}%")
        for leaf, value in leaves.items():
            ids.append(f"{group}/{leaf}")
            labels.append(leaf)
            parents.append(group)
            values.append(value)
            colors.append(color)
            texts.append(f"{format_si(value)}<br>{100 * value / total:.1f}%")   # narrow: fits the q/k/v boxes
    fig = go.Figure(go.Treemap(
        ids=ids, labels=labels, parents=parents, values=[float(v) for v in values], branchvalues="total",
        marker=dict(colors=colors, line=dict(color="white", width=2)),
        text=texts, texttemplate="<b>%{label}</b><br>%{text}", textfont=dict(size=FONT_SIZE),
        hovertemplate=words.treemap_hover + "<extra></extra>",
        pathbar=dict(visible=False), tiling=dict(pad=2), maxdepth=3, root=dict(color="#ffffff"),
    ))
    apply_theme(fig, title, height)
    fig.update_layout(uniformtext=dict(minsize=TREEMAP_MIN_TEXT, mode="hide"))   # no unreadable specks
    fig.update_layout(margin=dict(l=4, r=4, t=60 if title else 8, b=4))
    return fig


def layer_split_figure(rows: list[tuple[str, dict[str, int]]], title: str | None = None,
                       words: Words = WORDS) -> go.Figure:
    """One 100% bar per model: how a single layer splits into attention / MLP / norms, with % labels in the bars.

    rows: [(model name, {"attention": n, "mlp": n, "norms": n}), ...], drawn top to bottom.
    """
    names = [name for name, _ in rows]
    fig = go.Figure()
    for group in ("attention", "mlp", "norms"):
        shares = [100 * groups.get(group, 0) / max(1, sum(groups.values())) for _, groups in rows]
        counts = [groups.get(group, 0) for _, groups in rows]
        fig.add_trace(go.Bar(
            y=names, x=shares, orientation="h", name=words.group(group), marker_color=GROUP_COLORS[group],
            text=[f"{words.group(group)} {s:.0f}%" if s >= 12 else (f"{s:.0f}%" if s >= 4 else "") for s in shares],
            textposition="inside", insidetextanchor="middle", textfont=dict(size=FONT_SIZE, color="white"),
            customdata=counts,
            hovertemplate=fill(words.layer_hover, group=words.group(group)) + "<extra></extra>",
        ))
    return _percent_bars_layout(fig, title, height=(150 if title else 110) + 62 * len(rows),
                                x_title=words.layer_share)


def memory_figure(weights: dict[str, int], kv: dict[str, int], context_len: int, batch: int,
                  title: str | None = None, height: int = 420, words: Words = WORDS) -> go.Figure:
    """Bytes of the weights per storage type next to the KV cache per attention variant (shared y axis).

    weights: {"fp32": bytes, "bf16": ..., "int8": ..., "int4": ...}
    kv: {"MHA (32 KV heads)": bytes, "GQA (8 KV heads)": ..., "MQA (1 KV head)": ...}
    """
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04, column_widths=[0.55, 0.45],
                        subplot_titles=(words.weights, fill(words.kv_title_batch if batch > 1 else words.kv_title,
                                                            n=f"{context_len:,}", batch=f"{batch:,}")))
    fig.add_trace(go.Bar(
        x=list(weights), y=[float(v) for v in weights.values()],
        marker_color=[DTYPE_COLORS.get(k, PALETTE[0]) for k in weights],
        text=[format_bytes(v) for v in weights.values()], textposition="outside", textfont=dict(size=FONT_SIZE),
        cliponaxis=False, hovertemplate=words.weights_hover + "<extra></extra>", showlegend=False,
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        x=[k.replace(" (", "<br>(") for k in kv], y=[float(v) for v in kv.values()],
        marker_color=[VARIANT_COLORS.get(k.split()[0], PALETTE[5]) for k in kv],
        text=[format_bytes(v) for v in kv.values()], textposition="outside", textfont=dict(size=FONT_SIZE),
        cliponaxis=False, hovertemplate=words.kv_hover + "<extra></extra>", showlegend=False,
    ), row=1, col=2)
    apply_theme(fig, title, height)
    top = float(max([*weights.values(), *kv.values(), 1]))   # floats: exact ints may exceed 64 bits
    fig.update_yaxes(range=[0, top * 1.18], title_text=words.bytes, tickformat="~s", ticksuffix="B", row=1, col=1)
    fig.update_yaxes(range=[0, top * 1.18], row=1, col=2)
    fig.update_annotations(font=dict(size=TITLE_FONT_SIZE - 2))
    fig.update_layout(margin=dict(t=90 if title else 50))
    return fig


def comparison_figure(rows: list[tuple[str, dict[str, int]]], title: str | None = None,
                      words: Words = WORDS) -> go.Figure:
    """100% bars of the five main parts for two (or more) models, the count in each segment's hover.

    rows: [(model name, {"embeddings": n, "attention": n, "mlp": n, "norms": n, "head": n}), ...]
    """
    names = [f"{name}<br>{format_si(sum(groups.values()), digits=4)}" for name, groups in rows]
    fig = go.Figure()
    for group in ("embeddings", "attention", "mlp", "norms", "head"):
        counts = [groups.get(group, 0) for _, groups in rows]
        shares = [100 * c / max(1, sum(groups.values())) for c, (_, groups) in zip(counts, rows, strict=True)]
        fig.add_trace(go.Bar(
            y=names, x=shares, orientation="h", name=words.group(group), marker_color=GROUP_COLORS[group],
            text=[f"{s:.0f}%" if s >= 5 else "" for s in shares], textposition="inside",
            insidetextanchor="middle", textfont=dict(size=FONT_SIZE, color="white"), customdata=counts,
            hovertemplate=fill(words.compare_hover, group=words.group(group)) + "<extra></extra>",
        ))
    return _percent_bars_layout(fig, title, height=(170 if title else 130) + 70 * len(rows),
                                x_title=words.all_share)


def _percent_bars_layout(fig: go.Figure, title: str | None, height: int, x_title: str) -> go.Figure:
    """Shared look of the stacked 100% bar charts: theme, legend on top, 0-100% axis, first row on top."""
    apply_theme(fig, title, height=height)
    fig.update_layout(barmode="stack", bargap=0.25, uniformtext=dict(minsize=TICK_FONT_SIZE, mode="hide"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                                  traceorder="normal", font=dict(size=TICK_FONT_SIZE)))
    if title:
        fig.update_layout(margin=dict(t=85), title=dict(y=0.98, yanchor="top"))
    fig.update_xaxes(range=[0, 100.5], tickvals=PERCENT_TICKS, ticktext=[f"{v}%" for v in PERCENT_TICKS],
                     title_text=x_title)
    fig.update_yaxes(autorange="reversed")
    return fig


def flops_figure(matmul: int, attention_per_position: int, context_lens: list[int], marker: int | None = None,
                 title: str | None = None, height: int = 380, words: Words = WORDS) -> go.Figure:
    """Forward FLOPs per token vs context length: the flat matmul part and the attention part that grows with it."""
    attention = [float(attention_per_position * n) for n in context_lens]    # floats: ints may exceed 64 bits
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=context_lens, y=[float(matmul)] * len(context_lens), name=words.matmuls,
                             mode="lines", stackgroup="flops", line=dict(color=GROUP_COLORS["mlp"]),
                             hovertemplate=words.matmul_hover + "<extra></extra>"))
    fig.add_trace(go.Scatter(x=context_lens, y=attention, name=words.attention_flops, mode="lines",
                             stackgroup="flops", line=dict(color=GROUP_COLORS["attention"]),
                             hovertemplate=words.attention_hover + "<extra></extra>"))
    if marker is not None:
        fig.add_vline(x=marker, line=dict(color="#333333", dash="dot", width=2))
    apply_theme(fig, title, height)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                                  traceorder="normal", font=dict(size=TICK_FONT_SIZE)), hovermode="x unified")
    fig.update_xaxes(title_text=words.context_axis, tickformat="~s")
    fig.update_yaxes(title_text=words.flops_axis, tickformat="~s")
    return fig
