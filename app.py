"""Attention Atlas: router only. Each view lives in app_pages/."""
import streamlit as st

st.set_page_config(page_title="Attention Atlas", page_icon="🔭", layout="wide")
pages = [
    st.Page("app_pages/attention.py", title="Attention", icon="🔍", default=True),
]
st.navigation(pages).run()
