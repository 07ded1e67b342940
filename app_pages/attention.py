"""Attention: one head, one layer, the whole model (work in progress)."""
import streamlit as st

from app_pages import _state as state

st.title("Attention")
trace = state.current_trace()
if trace is None:
    st.stop()
state.layer_head_controls()
state.query_token_strip(trace)
sel = state.selection(trace)
st.write(sel)
