"""Small helpers shared by every page: safe text for Markdown-rendering widgets, figures, selections, labels."""
from __future__ import annotations

import functools
import re

import plotly.graph_objects as go
import streamlit as st

from app_core.budget import nbytes
from app_core.call_key import Unkeyable, call_key
from app_core.schemas import PRESENT
from app_pages.frame import session as caches
from app_pages.frame.i18n import _
from server.streamlit_fixes import freeze_figure
from viz.labels import symbol_legend
from viz.theme import scale_fonts

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^])")
PRESENTER_FONT_SCALE = 1.25     # presenter mode: chart text 14 -> 18 px, 16 -> 20 px
PRESENT_KEY = PRESENT.key       # presenter mode's state key
SCALED = "_atlas_scaled"        # a shared figure: made for its mode (presenter text applied where it applies)
FIGURE_BYTES = 32 * 1024        # a shared figure's bytes besides its arrays (layout, labels), for the budget


def escape_markdown(text: str) -> str:
    """Backslash-escape Markdown/Streamlit syntax so user text (token labels) shows literally."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def token_label(tokens: list[str], i: int, max_chars: int = 16) -> str:
    """'#12 ␣fox': position-prefixed (unique), shortened token label for captions and options."""
    tok = tokens[i]
    if len(tok) > max_chars:
        tok = tok[: max_chars - 1] + "…"
    return f"#{i} {tok}"


def token_legend(tokens: list[str], where=None) -> None:
    """A caption saying what the token symbols shown mean (nothing when there are none)."""
    legend = symbol_legend(tokens, translate=_)
    if legend:
        (where or st).caption(_("Token symbols: {legend}").format(legend=escape_markdown(legend)))


def plotly_config(filename: str) -> dict:
    """st.plotly_chart config: PNG download (toolbar camera button) with a meaningful file name."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", filename).strip("_") or "figure"
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": safe, "scale": 2},
    }


ICON_ONLY = ("w_class_start", "w_lesson_back", "w_lesson_leave")     # buttons that show their icon alone
# Their labels stay in the page, visually hidden: the button's accessible name (screen readers, test tools).
ICON_ONLY_CSS = ", ".join(f'.st-key-{key} button [data-testid="stMarkdownContainer"]' for key in ICON_ONLY) + \
    " { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }"


def show_figure(fig, key: str, filename: str, image: dict | None = None, **kwargs):
    """st.plotly_chart with the shared config (PNG button named after the view), an explicit key, and larger
    text in presenter mode. image: other toImageButtonOptions for the toolbar's image button (format "svg", width,
    height, scale)."""
    if st.session_state.get(PRESENT_KEY) and not getattr(fig, SCALED, False):
        scale_fonts(fig, PRESENTER_FONT_SCALE)
    config = plotly_config(filename)
    config["toImageButtonOptions"].update(image or {})
    return st.plotly_chart(fig, key=key, config=config, **kwargs)


def shared_figure(build, *args, **kwargs):
    """build(*args, **kwargs) (a pure viz function), made once for every session that asks for the same figure in
    the same mode: a class's followers draw the view the teacher drew a moment before without making it again
    (making a figure is most of a page's run). Presenter mode's larger text is applied here. Show it with
    show_figure and never change it: it is shared."""
    present = bool(st.session_state.get(PRESENT_KEY))

    def make(frozen: bool = True) -> tuple:
        fig = build(*args, **kwargs)
        if present:
            scale_fonts(fig, PRESENTER_FONT_SCALE)
        setattr(fig, SCALED, True)
        spec_bytes = freeze_figure(fig) if frozen else 0    # its JSON made once, not at every session's run
        return fig, 2 * nbytes([args, list(kwargs.values())]) + spec_bytes + FIGURE_BYTES

    try:
        key = (call_key(build, args, kwargs), present)
    except Unkeyable:
        return make(frozen=False)[0]
    return caches.caches()["figures"].get(key, make)[0]


class SharedBuilders:
    """A viz module whose figure builders (its functions annotated `-> go.Figure`) make shared figures
    (shared_figure); its other names as they are. A page writes `vi = SharedBuilders(viz.inside)` and calls
    `vi.norm_lines(...)` as before: show the figures, never change them."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if callable(value) and getattr(value, "__annotations__", {}).get("return") in ("go.Figure", go.Figure):
            return functools.partial(shared_figure, value)
        return value


def selected_points(event) -> list:
    """The selected points of a st.plotly_chart selection state (dict-like), [] when there are none."""
    try:
        return list(event["selection"]["points"])
    except (KeyError, TypeError):
        return []


def selected_rows(event) -> list[int]:
    """The selected row positions of a st.dataframe selection state, [] when there are none."""
    try:
        return [int(r) for r in event["selection"]["rows"]]
    except (KeyError, TypeError, ValueError):
        return []


def picked_layer_head(points: list) -> tuple[int, int] | None:
    """(layer, head) from the first clicked point of an overview figure, else None.

    The point's customdata is [layer, head] (a list, or a dict {"0": layer, "1": head} when plotly sent a typed
    array); failing that, its x is the layer and its y the head (the overviews put layers across, heads down).
    """
    for point in points:
        if not isinstance(point, dict):
            continue
        data = point.get("customdata")
        if isinstance(data, dict):
            data = [data.get("0", data.get(0)), data.get("1", data.get(1))]
        candidates = [data[:2] if isinstance(data, list | tuple) and len(data) >= 2 else None,
                      [point.get("x"), point.get("y")]]
        for pair in candidates:
            try:
                layer, head = (int(round(float(v))) for v in pair)
            except (TypeError, ValueError):
                continue
            return layer, head
    return None
