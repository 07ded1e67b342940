"""Figures for the Attention page: one head, one layer, the whole model, one query token, next-token predictions.

Pure functions: numpy arrays + token labels in, plotly figures out (no streamlit, no torch).
Conventions: query tokens run down (y), key tokens across (x). Token axes are declared categorical with
position-prefixed labels (viz.labels), so repeated tokens never merge, a token such as "8" never turns the axis
numeric, and hovers name both tokens without a T x T customdata array. Cells the causal mask forbids (j > i) are
NaN drawn in MASKED_COLOR; with the attention sink hidden, key 0 and the rows left with nothing to show are drawn
in HIDDEN_COLOR with a hover that says why; a weight of 0 is the dark end of the scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.format import percent_labels, probability_axis
from viz.labels import plotly_escape, row_axis, token_axis, token_categories
from viz.margins import (
    TICK_PAD_PX,
    colour_bar_px,
    text_px,
    tick_angle,
    tick_depth,
    tick_spill,
    title_depth,
    widest_px,
)
from viz.text import N_, fill
from viz.theme import (
    ACCENT,
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    FONT_SIZE,
    HIDDEN_COLOR,
    MASKED_COLOR,
    PALETTE,
    TICK_FONT_SIZE,
    apply_theme,
    merge_layout,
    themed_layout,
)

GRID_MAX_CELLS = 128     # small multiples are mean-pooled to at most this many rows/columns per head
THUMB_CELLS = 20         # whole-model thumbnails: each head pooled to at most this many rows/columns
STRETCH_PERCENTILE = 99  # "stretch colours": the scale ends at this percentile of the shown weights
SINK_BLANK_ROWS = 2      # with the sink hidden, rows 0 and 1 have nothing to show (see head_stats.sink_hidden_view)


@dataclass(frozen=True)
class Words:
    """What the attention figures write (English defaults; pages pass them translated)."""

    weight: str = N_("weight")
    key_axis: str = N_("key j (attended to)")
    query_axis: str = N_("query i (attending)")
    earlier_keys_axis: str = N_("key j (earlier tokens)")
    layer: str = N_("layer")
    head: str = N_("head")
    head_n: str = N_("head {head}")
    probability: str = N_("probability")
    max: str = N_("max")
    n_a: str = N_("n/a")
    click_to_select: str = N_("click to select")
    cell_hover: str = N_("query %{y}<br>key %{x}<br>weight %{z:.4f}")
    grid_hover: str = N_("head {head}<br>query %{y:.0f}<br>key %{x:.0f}<br>weight %{z:.3f}")
    query_hover: str = N_("query #{query} → key %{x}<br>%{y}: weight %{z:.4f}")
    pick_hover: str = N_("layer %{customdata[0]}, head %{customdata[1]}")
    hidden_key: str = N_("key 0 (the attention sink) is hidden; the row is renormalized without it")
    blank_row_0: str = N_("query 0 can only attend to token 0, which is hidden: nothing to show")
    blank_row_1: str = N_("query 1 has one key left (itself): its weight is 1 by construction, so it is not shown")
    query_key_hover: str = N_("query %{y}, key %{x}")
    query_only_hover: str = N_("query %{y}")


WORDS = Words()


# ---------------------------------------------------------------------------------------------------- helpers
def causal_nan(pattern: np.ndarray, causal: bool = True) -> np.ndarray:
    """float32 copy of [..., T, T] with the masked cells (j > i) set to NaN (causal=False: an encoder's pattern,
    nothing masked)."""
    p = np.array(pattern, dtype=np.float32, copy=True)
    T = p.shape[-1]
    if causal:
        p[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = np.nan
    return p


def pool_square(matrix: np.ndarray, max_cells: int) -> tuple[np.ndarray, int]:
    """Mean-pool the last two axes in f x f blocks so both are <= max_cells (NaN-aware); returns (pooled, f)."""
    T = matrix.shape[-1]
    f = max(1, math.ceil(T / max_cells))
    if f == 1:
        return matrix, 1
    n = math.ceil(T / f)
    pad = n * f - T
    m = np.pad(matrix.astype(np.float32), [(0, 0)] * (matrix.ndim - 2) + [(0, pad), (0, pad)],
               constant_values=np.nan)
    blocks = m.reshape(*matrix.shape[:-2], n, f, n, f)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(blocks)
        total = np.where(finite, blocks, 0.0).sum(axis=(-3, -1))
        count = finite.sum(axis=(-3, -1))
        pooled = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return pooled.astype(np.float32), f


def colour_top(values: np.ndarray, stretch: bool = False, skip_rows: int = 1) -> float:
    """The top of a colour scale that starts at 0: the largest finite value (or, stretched, the 99th percentile)
    of rows skip_rows.. (row 0 always puts 1.0 on itself and would squash the scale); 1 when there is none."""
    rows = values[..., skip_rows:, :] if values.shape[-2] > skip_rows else values
    finite = rows[np.isfinite(rows)]
    if not finite.size:
        return 1.0
    top = float(np.percentile(finite, STRETCH_PERCENTILE)) if stretch else float(finite.max())
    return top if top > 0 else (float(finite.max()) or 1.0)


def _single_colour(colour: str) -> list:
    return [[0, colour], [1, colour]]


def sink_hidden_layers(cats: list[str], n_rows: int, allowed: np.ndarray | None = None,
                       words: Words = WORDS) -> list[go.Heatmap]:
    """Sink hidden: key 0 (rows 2..) and the blank rows 0-1 in HIDDEN_COLOR, each cell's hover saying why.

    cats: the token categories of both axes; allowed: [T, T] bool cells that are not masked (default j <= i)."""
    T = len(cats)
    ok = np.tri(T, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    layers = []
    if n_rows > SINK_BLANK_ROWS:
        rows = cats[SINK_BLANK_ROWS:n_rows]
        layers.append(go.Heatmap(
            z=np.ones((len(rows), 1)), x=cats[:1], y=rows, colorscale=_single_colour(HIDDEN_COLOR), showscale=False,
            zmin=0, zmax=1, name="hidden",
            hovertemplate=f"{words.query_only_hover}<br>{words.hidden_key}<extra></extra>"))
    blank = min(SINK_BLANK_ROWS, n_rows, T)
    z = np.where(ok[:blank, :blank], 1.0, np.nan)
    notes = (words.blank_row_0, words.blank_row_1)
    text = np.array([[notes[i]] * blank for i in range(blank)], dtype=object)
    layers.append(go.Heatmap(
        z=z, x=cats[:blank], y=cats[:blank], text=text, colorscale=_single_colour(HIDDEN_COLOR), showscale=False,
        zmin=0, zmax=1, hoverongaps=False, name="nothing to show",
        hovertemplate=f"{words.query_key_hover}<br>%{{text}}<extra></extra>"))
    return layers


# --------------------------------------------------------------------------------------------------- one head
LABEL_PX = 18            # a token tick label (14 px text, turned 90° when crowded) needs this much room
SQUARE_CHROME_PX = 130   # height a square token heatmap has outside its plot, about: title, labels (for thinning)
COLOUR_BAR_THICKNESS = 14


def square_layout(tick_text: list[str], n: int, height: int, titled: bool, show_scale: bool) -> dict:
    """Layout of an n x n token heatmap `height` px tall whose both axes show tick_text (one label every n /
    len(tick_text) cells): margins that fit the labels, axis titles and colour bar (viz.margins), the x labels'
    angle, and a width that leaves a square plot. {"width", "margin", "tickangle"}."""
    widest = widest_px(tick_text, TICK_FONT_SIZE)
    top = 60 if titled else 20                                       # as apply_theme
    title = title_depth(FONT_SIZE)
    first_guess = height - top - tick_depth(widest, 0, TICK_FONT_SIZE) - title
    angle = tick_angle(widest, first_guess / max(1, len(tick_text)), TICK_FONT_SIZE)
    bottom = math.ceil(tick_depth(widest, angle, TICK_FONT_SIZE) + title)
    side = max(120, height - top - bottom)
    spill = tick_spill(widest, angle, TICK_FONT_SIZE) - side / n / 2        # the last x label past the plot's edge
    right = colour_bar_px(COLOUR_BAR_THICKNESS, side) if show_scale else max(10.0, spill + 4)
    left = max(widest + TICK_PAD_PX + title, spill + 4 if angle == 0 else 0)
    margin = dict(l=math.ceil(left), r=math.ceil(right), t=top, b=bottom)
    return dict(width=margin["l"] + side + margin["r"], margin=margin, tickangle=angle)


def head_heatmap(pattern: np.ndarray, tokens: list[str], *, title: str | None = None, query: int | None = None,
                 zmax: float | None = None, stretch: bool = False, sink_hidden: bool = False,
                 max_labels: int | None = None, height: int = 560, show_scale: bool = True, causal: bool = True,
                 words: Words = WORDS) -> go.Figure:
    """One head's [T, T] attention: query i down, key j across; masked cells grey, weight 0 = dark (causal=False:
    an encoder's, every cell a weight).

    A square plot in a figure of its own size (square_layout): show it at that width, so the colour bar sits by the
    matrix. pattern: the weights to show (with the sink hidden: head_stats.sink_hidden_view, whose NaN
    cells this draws as hidden). query outlines one query row. zmax defaults to the largest weight shown in rows
    1.. (stretch: the 99th percentile). Tick labels are thinned to what the side fits (or max_labels).
    show_scale=False drops the colour bar (a small preview; the hover still gives every weight).
    """
    p = np.asarray(pattern)
    T = len(tokens)
    if p.shape != (T, T):
        raise ValueError(f"pattern must be [T, T] = [{T}, {T}], got {p.shape}")
    z = causal_nan(p, causal)
    cats = token_categories(tokens)
    top = zmax or colour_top(z, stretch, SINK_BLANK_ROWS if sink_hidden else 1)
    gap = 1 if T <= 48 else 0
    traces = [go.Heatmap(
        z=z, x=cats, y=cats, colorscale=ATTENTION_SCALE, zmin=0.0, zmax=top, hoverongaps=False, xgap=gap, ygap=gap,
        name="attention", showscale=show_scale,
        colorbar=dict(title=dict(text=words.weight), thickness=COLOUR_BAR_THICKNESS),
        hovertemplate=words.cell_hover + "<extra></extra>")]
    if sink_hidden:
        traces += sink_hidden_layers(cats, T, words=words)
    shapes = []
    if query is not None and 0 <= query < T:
        shapes.append(dict(type="rect", x0=-0.5, x1=query + 0.5, y0=query - 0.5, y1=query + 0.5,
                           line=dict(color=ACCENT, width=2), fillcolor="rgba(0,0,0,0)"))
    axis = token_axis(tokens, max_labels or max(4, (height - SQUARE_CHROME_PX) // LABEL_PX))
    box = square_layout(axis["ticktext"], T, height, bool(title), show_scale)
    layout = themed_layout(dict(
        xaxis=dict(title=dict(text=words.key_axis), **axis, tickangle=box["tickangle"], showgrid=False,
                   zeroline=False, constrain="domain"),
        yaxis=dict(title=dict(text=words.query_axis), **axis, autorange="reversed", showgrid=False,
                   zeroline=False, scaleanchor="x", constrain="domain")), title=title, height=height)
    layout.update(width=box["width"], margin=dict(box["margin"], pad=0), plot_bgcolor=MASKED_COLOR,
                  shapes=shapes)                                    # no pad: a grey frame reads as masked
    return go.Figure(traces, layout=layout)


# -------------------------------------------------------------------------------------------------- one layer
def layer_grid(patterns: np.ndarray, *, selected: int | None = None, title: str | None = None,
               stretch: bool = False, sink_hidden: bool = False, ncols: int | None = None,
               max_cells: int = GRID_MAX_CELLS, height: int | None = None, causal: bool = True,
               words: Words = WORDS) -> go.Figure:
    """All heads of one layer as small multiples [H, T, T], each head on its own colour scale (0 to its largest
    weight, or its 99th percentile when stretched), so every head's shape shows even on long texts; long texts
    are mean-pooled. selected outlines that head. Rows are queries, columns keys (no token ticks: too small)."""
    p = np.asarray(patterns)
    if p.ndim != 3 or p.shape[1] != p.shape[2]:
        raise ValueError(f"patterns must be [heads, T, T], got shape {p.shape}")
    H, T = p.shape[0], p.shape[-1]
    pooled, f = pool_square(causal_nan(p, causal), max_cells)
    n = pooled.shape[-1]
    ncols = ncols or math.ceil(math.sqrt(H))
    nrows = math.ceil(H / ncols)
    fig = make_subplots(rows=nrows, cols=ncols, subplot_titles=[fill(words.head_n, head=h) for h in range(H)],
                        horizontal_spacing=0.02, vertical_spacing=0.08 if nrows > 1 else 0.0)
    pos = (np.arange(n) * f + (f - 1) / 2).astype(np.float32)      # pooled cell centres, in token positions
    skip = 1 if f > 1 else (SINK_BLANK_ROWS if sink_hidden else 1)
    for h in range(H):
        axis = "coloraxis" if h == 0 else f"coloraxis{h + 1}"
        fig.add_trace(go.Heatmap(
            z=pooled[h], x=pos, y=pos, coloraxis=axis, hoverongaps=False, name=fill(words.head_n, head=h),
            hovertemplate=fill(words.grid_hover, head=h) + "<extra></extra>"),
            row=h // ncols + 1, col=h % ncols + 1)
        fig.update_layout({axis: dict(colorscale=ATTENTION_SCALE, cmin=0.0, cmax=colour_top(pooled[h], stretch, skip),
                                      showscale=False)})
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, range=[-0.5, T - 0.5], type="linear")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, range=[T - 0.5, -0.5], type="linear")
    for h in range(H):
        suffix = "" if h == 0 else str(h + 1)
        box = dict(type="rect", xref=f"x{suffix}", yref=f"y{suffix}", x0=-0.5, x1=T - 0.5, y0=-0.5, y1=T - 0.5)
        fig.add_shape(**box, line=dict(width=0), fillcolor=MASKED_COLOR, layer="below")
        if h == selected:
            fig.add_shape(**box, line=dict(color=ACCENT, width=4), fillcolor="rgba(0,0,0,0)")
    if selected is not None and 0 <= selected < H:
        fig.layout.annotations[selected].update(text=f"<b>{fill(words.head_n, head=selected)}</b>",
                                                font=dict(color=ACCENT))
    row_height = int(min(280, 760 / ncols + 30))          # about square in a ~900 px wide main column
    apply_theme(fig, title=title, height=height or row_height * nrows + (70 if title else 40))
    fig.update_layout(plot_bgcolor="white")
    return fig


# ----------------------------------------------------------------------------------------------- whole model
# Overviews are wide and short: layers across (x), heads down (y, head 0 on top), so 30 x 9 cells fill a narrow
# main column without squeezing. Values are in the hover (and in the cells only when there are few columns).
VALUES_MAX_COLUMNS = 12     # write the numbers into the cells only up to this many layers (wider cells)


def _overview_axes(L: int, H: int, words: Words) -> dict:
    step = 1 if L <= 16 else 2 if L <= 40 else math.ceil(L / 20)
    return dict(xaxis=dict(title=dict(text=words.layer), type="linear", tickmode="array",
                           tickvals=list(range(0, L, step)), ticktext=[str(i) for i in range(0, L, step)],
                           showgrid=False, zeroline=False, range=[-0.5, L - 0.5]),
                yaxis=dict(title=dict(text=words.head), type="linear", tickmode="array", tickvals=list(range(H)),
                           ticktext=[str(h) for h in range(H)], showgrid=False, zeroline=False,
                           range=[H - 0.5, -0.5]))


OVERVIEW_BAR_THICKNESS = 12
OVERVIEW_PLOT_PX = 1000  # wider than an overview's plot gets (the main column at 1280 px): room for the bar's gap


def _overview_layout(L: int, H: int, words: Words, *, title: str | None, height: int, scale_title: str | None,
                     selected: tuple[int, int] | None, background: str) -> dict:
    """An overview's whole layout: layer / head axes, the shared look, room for its tick labels, axis titles and
    colour bar (viz.margins), the selected head outlined, clicks selecting a point."""
    axes = _overview_axes(L, H, words)
    layout = themed_layout(dict(axes, shapes=[_selected_box(*selected)] if selected is not None else []), title,
                           height)
    axis_title = title_depth(FONT_SIZE)
    left = widest_px(axes["yaxis"]["ticktext"], TICK_FONT_SIZE) + TICK_PAD_PX + axis_title
    bottom = tick_depth(widest_px(axes["xaxis"]["ticktext"], TICK_FONT_SIZE), 0, TICK_FONT_SIZE) + axis_title
    right = colour_bar_px(OVERVIEW_BAR_THICKNESS, OVERVIEW_PLOT_PX, FONT_SIZE if scale_title else None)
    return merge_layout(layout, dict(margin=dict(l=math.ceil(left), r=math.ceil(right), b=math.ceil(bottom), pad=0),
                                     plot_bgcolor=background, clickmode="event+select", dragmode=False,
                                     hovermode="closest"))


def _overview_height(H: int, height: int | None, title: str | None) -> tuple[int, float]:
    """(figure height, pixels per head row): about 28 px a row plus title and axis."""
    chrome = 110 + (40 if title else 0)
    height = height or int(min(560, max(240, 28 * H + chrome)))
    return height, max(8.0, (height - chrome) / max(H, 1))


def _click_layer(L: int, H: int, size: float, words: Words, text: list[str] | None = None) -> dict:
    """Invisible square markers on every (layer, head) cell: what a click selects (heatmaps can't be selected).

    customdata is [layer, head]; the marker layer also carries the hover (the heatmap under it skips hover), so
    the point under the mouse is always the one a click picks. text, if given, is shown in the hover.
    """
    layer, head = np.divmod(np.arange(L * H), H)
    extra = "<br>%{text}" if text is not None else ""
    return dict(
        type="scatter", x=layer, y=head, mode="markers", customdata=np.stack([layer, head], axis=-1),
        name="pick a head", text=text,
        marker=dict(symbol="square", size=size, color="rgba(0,0,0,0)", line=dict(width=0)),
        selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)),
        hovertemplate=f"{words.pick_hover}{extra}<extra>{words.click_to_select}</extra>",
        showlegend=False)


def _selected_box(layer: int, head: int) -> dict:
    return dict(type="rect", x0=layer - 0.5, x1=layer + 0.5, y0=head - 0.5, y1=head + 0.5,
                line=dict(color=ACCENT, width=3), fillcolor="rgba(0,0,0,0)")


def stat_overview(values: np.ndarray, *, label: str, selected: tuple[int, int] | None = None,
                  zmin: float | None = 0.0, zmax: float | None = None, show_values: bool | None = None,
                  scale_title: str | None = None, title: str | None = None, height: int | None = None,
                  signed: bool = False, words: Words = WORDS) -> go.Figure:
    """A [layers, heads] statistic as one wide heatmap: layers across, heads down (head 0 on top), NaN grey.

    The value is in the hover; show_values writes it into the cells too (default: only when there are at most
    VALUES_MAX_COLUMNS layers, so the cells are wide enough). scale_title is the colour bar's (short) title; the
    figure title names the statistic. A transparent marker sits on every cell so st.plotly_chart(on_select=...)
    can report a click as customdata [layer, head]. selected outlines the current head. signed: a diverging
    scale symmetric about 0 (white = 0; zmin / zmax are then ignored) and signed values in the hover.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"values must be [layers, heads], got shape {v.shape}")
    if signed:
        finite = np.abs(v[np.isfinite(v)])
        zmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        zmin = -zmax
    L, H = v.shape
    height, row_px = _overview_height(H, height, title)
    show = L <= VALUES_MAX_COLUMNS if show_values is None else show_values
    z = v.T                                                                 # [H, L]
    text = np.where(np.isfinite(z), np.char.mod("%.2f", np.nan_to_num(z)), "")
    cells = dict(
        type="heatmap", z=z, x=list(range(L)), y=list(range(H)),
        colorscale=DIVERGING_SCALE if signed else ATTENTION_SCALE, zmin=zmin,
        zmax=zmax if zmax is not None else (colour_top(v, skip_rows=0) if zmin is not None else None),
        hoverongaps=False, text=text if show else None, texttemplate="%{text}" if show else None,
        textfont=dict(size=12), xgap=1, ygap=1, hoverinfo="skip", name=label,
        colorbar=dict(title=dict(text=scale_title or "", side="right"), thickness=OVERVIEW_BAR_THICKNESS))
    hover = [f"{label}: {x:{'+' if signed else ''}.3f}" if np.isfinite(x) else f"{label}: {words.n_a}"
             for x in v.ravel()]
    return go.Figure([cells, _click_layer(L, H, size=row_px * 0.9, words=words, text=hover)],
                     layout=_overview_layout(L, H, words, title=title, height=height, scale_title=scale_title,
                                             selected=selected, background=MASKED_COLOR))


def thumbnail_tiles(attention: np.ndarray, *, per_layer=None, cells: int = THUMB_CELLS,
                    causal: bool = True) -> np.ndarray:
    """Every head's pattern shrunk to a thumbnail: [L, H, T, T] -> [L, H, n, n] with n <= cells.

    Mean-pooled over blocks of tokens (masked cells NaN) and scaled to the head's own maximum, so the shape of
    the pattern (diagonal, vertical stripe, blur) shows even where weights are small. per_layer, if given, maps
    one layer's [H, T, T] first (e.g. head_stats.sink_hidden_view). One layer at a time: bounded memory at T = 512.
    """
    a = np.asarray(attention)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attention must be [layers, heads, T, T], got shape {a.shape}")
    L, H, T = a.shape[0], a.shape[1], a.shape[-1]
    n = math.ceil(T / math.ceil(T / cells))              # thumbnail side after pooling (pool_square's rule)
    tiles = np.empty((L, H, n, n), dtype=np.float32)
    for layer in range(L):
        heads = a[layer] if per_layer is None else per_layer(a[layer])
        pooled, _ = pool_square(causal_nan(heads, causal), cells)
        with np.errstate(invalid="ignore"):
            top = np.nanmax(np.where(np.isfinite(pooled), pooled, -np.inf), axis=(-2, -1), keepdims=True)
            tiles[layer] = pooled / np.where(top > 0, top, 1.0)
    return tiles


def thumbnail_overview(tiles: np.ndarray, *, selected: tuple[int, int] | None = None, title: str | None = None,
                       height: int | None = None, causal: bool = True, words: Words = WORDS) -> go.Figure:
    """thumbnail_tiles [L, H, n, n] as one wide heatmap of tiles: layers across, heads down; masked cells grey
    (causal=False: none).

    Each tile keeps its own orientation (queries down, keys across). Like stat_overview, a transparent marker
    on every tile reports a click as customdata [layer, head].
    """
    tiles = np.asarray(tiles, dtype=np.float32)
    if tiles.ndim != 4 or tiles.shape[-1] != tiles.shape[-2]:
        raise ValueError(f"tiles must be [layers, heads, n, n], got shape {tiles.shape}")
    L, H, n = tiles.shape[0], tiles.shape[1], tiles.shape[-1]
    gap = max(1, n // 6)
    size = n + gap
    big = np.full((H * size, L * size), np.nan, dtype=np.float32)     # heads down, layers across
    for layer in range(L):
        for head in range(H):
            big[head * size: head * size + n, layer * size: layer * size + n] = tiles[layer, head]
    x = ((np.arange(L * size) - (n - 1) / 2) / size).astype(np.float32)   # tile centres land on integers
    y = ((np.arange(H * size) - (n - 1) / 2) / size).astype(np.float32)
    half = n / 2 / size
    tri_x, tri_y = [], []                                # grey triangles (key j > query i) under every tile
    for layer in range(L if causal else 0):
        for head in range(H):
            tri_x += [layer - half, layer + half, layer + half, layer - half, None]
            tri_y += [head - half, head - half, head + half, head - half, None]
    masked = dict(type="scatter", x=tri_x, y=tri_y, mode="lines", fill="toself", fillcolor=MASKED_COLOR,
                  line=dict(width=0), hoverinfo="skip", showlegend=False, name="masked")
    pattern = dict(type="heatmap", z=big, x=x, y=y, colorscale=ATTENTION_SCALE, zmin=0, zmax=1, hoverinfo="skip",
                   colorbar=dict(title=dict(text="", side="right"), thickness=OVERVIEW_BAR_THICKNESS,
                                 tickvals=[0, 1], ticktext=["0", words.max]),
                   name="pattern")
    height, row_px = _overview_height(H, height, title)
    return go.Figure([masked, pattern, _click_layer(L, H, size=row_px * 0.9, words=words)],
                     layout=_overview_layout(L, H, words, title=title, height=height, scale_title=None,
                                             selected=selected, background="white"))


# ---------------------------------------------------------------------------------------------- one query row
QUERY_PLOT_PX = 520      # about the narrowest its plot gets (the main column at 1024 px): sets the labels' angle


def query_heads_heatmap(rows: np.ndarray, tokens: list[str], query: int, *, selected: int | None = None,
                        sink_hidden: bool = False, title: str | None = None, max_labels: int = 40,
                        height: int | None = None, causal: bool = True, words: Words = WORDS) -> go.Figure:
    """Attention of one query token over keys 0..query for every head of a layer: rows [H, T] -> heads x keys
    (causal=False: an encoder's, over every key).

    With the sink hidden (rows renormalized without key 0, key 0 NaN) key 0 is drawn as hidden."""
    r = np.asarray(rows, dtype=np.float32)
    T = len(tokens)
    if r.ndim != 2 or r.shape[1] != T or not 0 <= query < T:
        raise ValueError(f"rows must be [heads, {T}] and 0 <= query < {T}, got {r.shape} and {query}")
    H = r.shape[0]
    last = query if causal else T - 1
    z = r[:, : last + 1]
    shown = tokens[: last + 1]
    cats = token_categories(shown)
    heads = [fill(words.head_n, head=h) for h in range(H)]
    finite = z[np.isfinite(z)]
    fig = go.Figure(go.Heatmap(
        z=z, x=cats, y=heads, colorscale=ATTENTION_SCALE, zmin=0.0,
        zmax=float(finite.max()) if finite.size and finite.max() > 0 else 1.0, xgap=1 if last < 48 else 0, ygap=1,
        colorbar=dict(title=dict(text=words.weight), thickness=COLOUR_BAR_THICKNESS), name="attention",
        hoverongaps=False, hovertemplate=fill(words.query_hover, query=query) + "<extra></extra>"))
    if sink_hidden:
        fig.add_trace(go.Heatmap(z=np.ones((H, 1)), x=cats[:1], y=heads, colorscale=_single_colour(HIDDEN_COLOR),
                                 showscale=False, zmin=0, zmax=1, name="hidden",
                                 hovertemplate=f"%{{y}}: {words.hidden_key}<extra></extra>"))
    if selected is not None and 0 <= selected < H:
        fig.add_shape(type="rect", x0=-0.5, x1=last + 0.5, y0=selected - 0.5, y1=selected + 0.5,
                      line=dict(color=ACCENT, width=3), fillcolor="rgba(0,0,0,0)")
    axis = token_axis(shown, max_labels)
    widest = widest_px(axis["ticktext"], TICK_FONT_SIZE)
    angle = tick_angle(widest, QUERY_PLOT_PX / len(axis["ticktext"]), TICK_FONT_SIZE)
    fig.update_xaxes(title_text=words.earlier_keys_axis if causal else words.key_axis, **axis, tickangle=angle,
                     showgrid=False)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    apply_theme(fig, title=title, height=height or 150 + 34 * H)
    fig.update_layout(plot_bgcolor=MASKED_COLOR, margin=dict(
        l=math.ceil(max(widest_px(heads, TICK_FONT_SIZE) + 2 * TICK_PAD_PX, tick_spill(widest, angle, TICK_FONT_SIZE))),
        r=math.ceil(colour_bar_px(COLOUR_BAR_THICKNESS, QUERY_PLOT_PX)),
        b=math.ceil(tick_depth(widest, angle, TICK_FONT_SIZE) + title_depth(FONT_SIZE))))
    return fig


# ------------------------------------------------------------------------------------------ next-token panel
def next_token_bars(labels: list[str], probs: np.ndarray, *, title: str | None = None,
                    height: int | None = None, words: Words = WORDS) -> go.Figure:
    """Top-k next-token predictions as horizontal bars, most likely on top, with the probability written.

    Rows sit at positions 0..k-1 with the token as tick text (a token such as '8' never makes the axis numeric)."""
    p = np.asarray(probs, dtype=np.float64)
    if len(labels) != p.size:
        raise ValueError(f"{len(labels)} labels for {p.size} probabilities")
    names = [f"{k + 1}. {t}" for k, t in enumerate(labels)]
    fig = go.Figure(go.Bar(
        x=p, y=np.arange(p.size), orientation="h", marker_color=[ACCENT] + [PALETTE[0]] * (p.size - 1),
        text=percent_labels(p), textposition="outside", cliponaxis=False, name="probability",
        customdata=[plotly_escape(n) for n in names], hovertemplate="%{customdata}: %{x:.4f}<extra></extra>"))
    rows = row_axis(names, max_chars=20)
    fig.update_yaxes(**rows, showgrid=False)
    fig.update_xaxes(title_text=words.probability, **probability_axis(float(p.max(initial=0)) * 1.25 + 0.02))
    apply_theme(fig, title=title, height=height or 90 + 34 * p.size)
    fig.update_layout(margin=dict(
        l=math.ceil(widest_px(rows["ticktext"], TICK_FONT_SIZE) + 2 * TICK_PAD_PX),
        r=math.ceil(text_px("100%", TICK_FONT_SIZE) / 2 + TICK_PAD_PX),     # a tick label at the axis' end
        b=math.ceil(tick_depth(0, 0, TICK_FONT_SIZE) + title_depth(FONT_SIZE))))
    return fig
