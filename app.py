"""Attention Atlas: router only. Each view lives in app_pages/; the shared sidebar and URL state in _state."""
from pathlib import Path

import streamlit as st

from app_pages import _state as state

ROOT = Path(__file__).resolve().parent
# (file, title, icon, url_path): a page is listed once its file exists
PAGES = [
    ("app_pages/attention.py", "Attention", ":material/grid_on:", "attention"),
    ("app_pages/causal_mask.py", "Causal mask", ":material/change_history:", "causal-mask"),
    ("app_pages/softmax.py", "Softmax & temperature", ":material/thermostat:", "softmax"),
    ("app_pages/positional.py", "Positional encodings", ":material/waves:", "positional"),
    ("app_pages/parameters.py", "Parameters", ":material/calculate:", "parameters"),
]

st.set_page_config(page_title="Attention Atlas", page_icon="🔭", layout="wide")
available = [spec for spec in PAGES if (ROOT / spec[0]).exists()]
pages = [st.Page(path, title=title, icon=icon, url_path=url, default=(i == 0))
         for i, (path, title, icon, url) in enumerate(available)]
page = st.navigation(pages)
state.init_from_url(pages, page)
state.shell_sidebar()
state.show_url_notes()
state.write_url()       # before the page: a page may st.stop()
try:
    page.run()
finally:
    state.write_url()   # after: the page may have clamped or set defaults
