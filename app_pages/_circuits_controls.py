"""The Circuits page's callbacks (kept out of the page script, as app_pages/_controls.py explains)."""
from __future__ import annotations

import streamlit as st

from app_core import schemas as S
from app_core.circuit_pairs import PAIRS


def use_pair(index: int) -> None:
    """on_click: the example pair's texts, answer and foil fill the pair's settings."""
    pair = PAIRS[index]
    for name, value in (("a", pair.clean), ("b", pair.corrupt), ("answer", pair.answer), ("foil", pair.foil)):
        st.session_state[S.CIRCUITS.by_name(name).key] = value
