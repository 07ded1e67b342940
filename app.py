"""Attention Atlas: router only. Each view lives in app_pages/; the shared sidebar and URL state in _state."""

import streamlit as st

from app_pages import _state as state

# (file, title, icon, name). The name is the page's URL path, except for
# the first (default) page: Streamlit serves the default page at "/" only, whatever its url_path, so it is
# registered with url_path "" and the app never makes a link to /attention (share links use "/?...").
PAGES = [
    ("app_pages/attention.py", "Attention", ":material/grid_on:", "attention"),
    ("app_pages/causal_mask.py", "Causal mask", ":material/change_history:", "causal-mask"),
    ("app_pages/softmax.py", "Softmax & temperature", ":material/thermostat:", "softmax"),
    ("app_pages/positional.py", "Positional encodings", ":material/waves:", "positional"),
    ("app_pages/parameters.py", "Parameters", ":material/calculate:", "parameters"),
]
# Narrow screens (1024 px projectors): less empty padding around the main column. Static CSS, no user text.
NARROW_CSS = """<style>
[data-testid="stMainBlockContainer"] { padding-top: 3.5rem; }
@media (max-width: 1200px) {
  [data-testid="stMainBlockContainer"] { padding-left: 1.5rem; padding-right: 1.5rem; }
}
</style>"""


def _old_attention_link() -> None:
    """/attention (links made before the default page moved to "/"): open the Attention page at "/" with the
    link's query params. A hidden page, so Streamlit serves the path instead of a "Page not found" dialog."""
    st.switch_page(pages[0], query_params=st.query_params.to_dict())


st.set_page_config(page_title="Attention Atlas", page_icon="🔭", layout="wide")
pages = [st.Page(path, title=title, icon=icon, url_path="" if i == 0 else name, default=(i == 0))
         for i, (path, title, icon, name) in enumerate(PAGES)]
old_link = st.Page(_old_attention_link, title="Attention (old link)", url_path=PAGES[0][3],
                   visibility="hidden")
page = st.navigation(pages + [old_link])
if page is old_link:
    page.run()              # switches to the default page: nothing below runs for the old path
st.html(NARROW_CSS)
state.init_from_url({name: p for (_, _, _, name), p in zip(PAGES, pages, strict=True)}, page)
state.shell_sidebar()
state.show_url_notes()
state.write_url()       # before the page: a page may st.stop()
try:
    page.run()
finally:
    state.write_url()   # after: the page may have clamped or set defaults
