"""Small helpers the Inside page's views share."""
from __future__ import annotations

import streamlit as st

from app_pages.frame.widgets import escape_markdown
from viz.labels import shorten

ss = st.session_state


def follow_text(param, text: str) -> None:
    """A setting chosen for one text (a piece, a target token) goes back to automatic when the text changes."""
    marker = f"_{param.key}_text"
    if marker in ss and ss[marker] != text:
        ss[param.key] = param.default
    ss[marker] = text


def tok_md(label: str, max_chars: int = 24) -> str:
    """A token label for Markdown: shortened, escaped, quoted, in bold."""
    return f"**‘{escape_markdown(shorten(label, max_chars))}’**"
