"""The Efficient attention page's callbacks: switch the masks view to another mask, load the long story. (What
the page computes is app_core/derived/efficient.py, through the session's workspace.)"""
from __future__ import annotations

import streamlit as st

from app_core import schemas as S
from app_core.examples import load_examples

STORY_TITLE = "A long story (attention sinks)"     # the example text the masks view offers to load


def switch_mask(kind: str) -> None:
    """Button callback: show another kind of mask (the masks view's setting)."""
    st.session_state[S.EFFICIENT.by_name("mask").key] = kind


def story_text() -> str | None:
    """The long example story (None if the examples file lacks it)."""
    return next((e["text"] for e in load_examples() if e["title"] == STORY_TITLE), None)


def load_story() -> None:
    """Button callback: the long story becomes the text (the masks view needs a few hundred tokens)."""
    text = story_text()
    if text is not None:
        st.session_state[S.TEXT.key] = text
        st.session_state[S.QUERY.key] = None
