"""The only place with Streamlit caches, and the mapping between the URL's query params and the app's state."""
from __future__ import annotations

import streamlit as st

from model import ForwardTrace, load_model

DEFAULT_MAX_TOKENS = 512


@st.cache_resource(show_spinner="Loading SmolLM2-135M (first start only, a few seconds)…")
def get_model():
    """The shared, read-only language model (loaded once per server process)."""
    return load_model()


@st.cache_resource(max_entries=8, show_spinner="Running the model on your text…")
def get_trace(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> ForwardTrace:
    """The forward trace for a text. cache_resource, not cache_data: no pickle copy of ~140 MB per rerun."""
    return get_model().run(text, max_tokens=max_tokens)
