"""Small helpers shared by every page: safe text for Markdown-rendering widgets, figure config, labels."""
from __future__ import annotations

import re

import streamlit as st

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^])")


def escape_markdown(text: str) -> str:
    """Backslash-escape Markdown/Streamlit syntax so user text (token labels) shows literally."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def token_label(tokens: list[str], i: int, max_chars: int = 16) -> str:
    """'#12 ␣fox': position-prefixed (unique), shortened token label for captions and options."""
    tok = tokens[i]
    if len(tok) > max_chars:
        tok = tok[: max_chars - 1] + "…"
    return f"#{i} {tok}"


def plotly_config(filename: str) -> dict:
    """st.plotly_chart config: PNG download (toolbar camera button) with a meaningful file name."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", filename).strip("_") or "figure"
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": safe, "scale": 2},
    }


def show_figure(fig, key: str, filename: str, **kwargs):
    """st.plotly_chart with the shared config (PNG button named after the view) and an explicit key."""
    return st.plotly_chart(fig, key=key, config=plotly_config(filename), **kwargs)


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
    """(layer, head) from the first clicked point whose customdata is [layer, head, ...], else None."""
    for point in points:
        data = point.get("customdata") if isinstance(point, dict) else None
        if data is not None and len(data) >= 2:
            try:
                return int(data[0]), int(data[1])
            except (TypeError, ValueError):
                continue
    return None
