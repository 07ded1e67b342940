"""Room for labels, reserved before plotly draws.

Plotly measures tick labels after a first draw; when they need more room than the layout's margins it moves the
margins and draws again, and again when the tick angle it picks changes with the room: ~65 of the ~80 ms a
token heatmap took to draw in Chromium (the whole redraw the user waits for after a head switch: 0.22 -> 0.15 s).
Figures whose labels are known here reserve that room from a generous estimate of the text's width, so plotly
draws once. Automargin stays on: an estimate that falls short costs a redraw, never a cut label.
"""
from __future__ import annotations

import html
import math
import unicodedata

NARROW_EM = 0.62       # width of a character, in font sizes: Source Sans (the charts' font) averages ~0.5, "m" 0.83
WIDE_EM = 1.05         # CJK, fullwidth forms and emoji take about a font size each
SYMBOL_EM = 0.95       # other non-ASCII symbols and punctuation (token marks ↵ ⇥ ⏎: 0.84, the ellipsis …: 0.95)
LINE_EM = 1.4          # height of one line of text, in font sizes (what plotly gives it)
LABEL_GAP_PX = 4       # horizontal tick labels closer than this read as one
TITLE_STANDOFF_PX = 12  # viz.theme's axis title_standoff
TITLE_EXTRA_PX = 12    # plotly puts an axis title up to this much further out than line + standoff (measured)
TICK_PAD_PX = 4        # between the plot and its tick labels (plotly: ticklen 0 + its label pad)


def text_px(text: str, size: float) -> float:
    """Estimated width in px of one line of plotly text (HTML entities read as their characters) at size px,
    erring wide."""
    return size * sum(_em(ch) for ch in html.unescape(text))


def widest_px(texts: list[str], size: float) -> float:
    """text_px of the widest of texts (0 when there are none)."""
    return max((text_px(t, size) for t in texts), default=0.0)


def _em(ch: str) -> float:
    if unicodedata.east_asian_width(ch) in ("W", "F") or ord(ch) >= 0x1F000:
        return WIDE_EM
    if not ch.isascii() and unicodedata.category(ch)[0] in ("S", "P"):
        return SYMBOL_EM
    return NARROW_EM


def tick_angle(widest: float, spacing: float, size: float) -> int:
    """The tick angle a row of labels (widest px, one every spacing px) is readable at: 0 if they fit side by
    side, 45 if slanted lines do not touch, else 90 (plotly's autotickangles choice, made before drawing)."""
    if widest + LABEL_GAP_PX <= spacing:
        return 0
    return 45 if LINE_EM * size * math.sqrt(2) + LABEL_GAP_PX <= spacing else 90


def tick_spill(widest: float, angle: int, size: float) -> float:
    """How far the labels at this angle reach along the axis from their tick, towards its end (a 45° label runs
    down and to the right of its tick)."""
    return {0: widest / 2, 45: tick_depth(widest, 45, size), 90: LINE_EM * size / 2}[angle]


def tick_depth(widest: float, angle: int, size: float) -> float:
    """How far labels at this angle reach away from the axis, in px (tick pad included)."""
    line = LINE_EM * size
    depth = {0: line, 45: (widest + line) / math.sqrt(2), 90: widest}[angle]
    return depth + TICK_PAD_PX


def title_depth(size: float) -> float:
    """Room an axis title of font size px takes beyond its tick labels (its line and the standoff)."""
    return LINE_EM * size + TITLE_STANDOFF_PX + TITLE_EXTRA_PX


BAR_PAD_PX = 10        # plotly's padding on each side of a colour bar
BAR_TICKS_PX = 10 + 44  # a colour bar's tick pad and widest tick label ("0.005" at 14 px)
BAR_GAP = 0.02         # a colour bar starts at x = 1.02 of the plot's width


def colour_bar_px(thickness: int, plot_px: float, side_title_size: float | None = None) -> float:
    """Room a vertical colour bar takes right of a plot plot_px wide: its gap, padding, bar, ticks, and a title
    turned along its side (side="right") when side_title_size is given (its font size)."""
    return (BAR_GAP * plot_px + 2 * BAR_PAD_PX + thickness + BAR_TICKS_PX
            + (LINE_EM * side_title_size if side_title_size else 0))
