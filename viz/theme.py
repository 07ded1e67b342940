"""One shared look for every figure: projector-readable fonts, margins and colour scales."""
from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

FONT_SIZE = 16          # base text size; readable from the back of a classroom
TICK_FONT_SIZE = 14
TITLE_FONT_SIZE = 20
ATTENTION_SCALE = "Viridis"   # sequential, perceptually uniform, colour-blind safe, dark = 0
DIVERGING_SCALE = "RdBu_r"    # signed values (scores, PE, dot products), white = 0
MASKED_COLOR = "#d9d9d9"      # cells the causal mask forbids: light grey, never a colour of the scale
HIDDEN_COLOR = "#f2f2f2"      # cells left out of a view (the attention sink when it is hidden): paler still
ACCENT = "#d62728"            # marks the current choice (temperature, query token, head)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


_GRID = "#e5ecf6"
# The look of plotly_white with only the keys we use: the full template costs ~11 ms per figure to copy and send.
TEMPLATE = go.layout.Template(layout=dict(
    paper_bgcolor="white", plot_bgcolor="white", colorway=PALETTE,
    colorscale=dict(sequential=ATTENTION_SCALE, diverging=DIVERGING_SCALE),
    xaxis=dict(gridcolor=_GRID, linecolor=_GRID, zerolinecolor=_GRID, ticks="", title_standoff=12),
    yaxis=dict(gridcolor=_GRID, linecolor=_GRID, zerolinecolor=_GRID, ticks="", title_standoff=12),
    polar=dict(bgcolor="white", angularaxis=dict(gridcolor=_GRID, linecolor=_GRID),
               radialaxis=dict(gridcolor=_GRID, linecolor=_GRID)),
))
# Every figure starts from it as plotly's default template: plotly sets the default without validating it again,
# where a template in a figure's layout is validated (its colour scales expanded) at each figure, ~9 ms.
pio.templates["atlas"] = TEMPLATE
pio.templates.default = "atlas"


AXIS_LOOK = dict(tickfont=dict(size=TICK_FONT_SIZE), automargin=True)


def _look(title: str | None, height: int | None) -> dict:
    """The layout keys of the shared look (axes apart: AXIS_LOOK on every axis)."""
    look = dict(font=dict(size=FONT_SIZE), margin=dict(l=10, r=10, t=60 if title else 20, b=10),
                hoverlabel=dict(font=dict(size=FONT_SIZE)),
                title=dict(text=title, font=dict(size=TITLE_FONT_SIZE)) if title else None)
    if height is not None:
        look["height"] = height
    return look


def apply_theme(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    """Set fonts, margins, white background and an optional title/height on fig, and return it."""
    fig.update_layout(_look(title, height))
    fig.update_xaxes(AXIS_LOOK)
    fig.update_yaxes(AXIS_LOOK)
    return fig


def merge_layout(base: dict, over: dict) -> dict:
    """A layout dict with over's values on base's, nested dicts merged (what update_layout does to a figure)."""
    out = dict(base)
    for key, value in over.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge_layout(out[key], value) if nested else value
    return out


def themed_layout(layout: dict, title: str | None = None, height: int | None = None) -> dict:
    """layout (a plain dict, nested dicts for font, title, margin, hoverlabel and axes) with the shared look over it,
    as apply_theme leaves a figure. For a figure made in one go, go.Figure(traces, layout=themed_layout(...)):
    plotly validates a constructor's dicts once, where each update_* call on a figure validates again (apply_theme
    alone costs ~10 ms; the Generate page's three figures took 19-28 ms each made and updated, 4-7 ms made so)."""
    axes = {"xaxis", "yaxis", *(k for k in layout if k.startswith(("xaxis", "yaxis")))}
    return merge_layout(layout, _look(title, height) | {name: AXIS_LOOK for name in axes})


def scale_fonts(fig: go.Figure, factor: float) -> go.Figure:
    """Every font size of fig (layout, title, axes, annotations, colour bars, trace text) and its margins (which
    figures size to their labels, viz.margins) times factor, in place: presenter mode enlarges chart text without
    each figure knowing about it."""
    def scale(font) -> None:
        if font is not None and font.size:
            font.size = round(font.size * factor)

    layout = fig.layout
    layout.font.size = round((layout.font.size or FONT_SIZE) * factor)
    for side in ("l", "r", "t", "b"):
        if layout.margin[side] is not None:
            layout.margin[side] = round(layout.margin[side] * factor)
    scale(layout.title.font)
    scale(layout.hoverlabel.font)
    scale(layout.legend.font)
    fig.for_each_xaxis(lambda ax: (scale(ax.tickfont), scale(ax.title.font)))
    fig.for_each_yaxis(lambda ax: (scale(ax.tickfont), scale(ax.title.font)))
    for annotation in layout.annotations:
        scale(annotation.font)
    def scale_colorbar(colorbar) -> None:            # unset colour-bar ticks are plotly's 12 px: start from ours
        if colorbar is not None:
            colorbar.tickfont.size = round((colorbar.tickfont.size or TICK_FONT_SIZE) * factor)

    for trace in fig.data:
        scale(getattr(trace, "textfont", None))
        scale_colorbar(getattr(trace, "colorbar", None))
    for name in layout:
        if name.startswith("coloraxis"):
            scale_colorbar(layout[name].colorbar)
    return fig
