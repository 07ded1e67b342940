"""Attention Atlas: the router, the script each session runs (app.py serves it). Each view lives in app_pages/; the
frame around it (link, state, shared controls) in app_pages/_shell.py."""
# Before any page builds a figure: plotly checks sys.modules for pandas while it validates a figure, and a pandas
# that another thread (the warm-up, a session's first table) is importing that moment is half-made and breaks the
# figure (AttributeError: partially initialized module 'pandas'). An import here waits until it is whole.
import pandas  # noqa: F401
import streamlit as st

from app_core.link import shown
from app_pages import _class_panel as class_panel
from app_pages import _generation_jobs as generation_jobs
from app_pages import _shell as shell
from app_pages._i18n import N_, _
from server import streamlit_fixes

streamlit_fixes.mend()
# (file, title, icon, name). The name is the page's URL path and its schema's name, except that the first
# (default) page is served at "/" only: Streamlit ignores a default page's url_path, so it is registered with
# url_path "" and share links use "/?...".
PAGES = [
    ("app_pages/attention.py", N_("Attention"), ":material/grid_on:", "attention"),
    ("app_pages/causal_mask.py", N_("Causal mask"), ":material/change_history:", "causal-mask"),
    ("app_pages/softmax.py", N_("Softmax & temperature"), ":material/thermostat:", "softmax"),
    ("app_pages/generate.py", N_("Generate"), ":material/edit:", "generate"),
    ("app_pages/inside.py", N_("Inside a block"), ":material/account_tree:", "inside"),
    ("app_pages/positional.py", N_("Positional encodings"), ":material/waves:", "positional"),
    ("app_pages/efficient.py", N_("Efficient attention"), ":material/speed:", "efficient"),
    ("app_pages/parameters.py", N_("Parameters"), ":material/calculate:", "parameters"),
    ("app_pages/train.py", N_("Train"), ":material/model_training:", "train"),
    ("app_pages/lessons.py", N_("Lessons"), ":material/school:", "lessons"),
    ("app_pages/circuits.py", N_("Circuits"), ":material/hub:", "circuits"),
]


# Work a page asks for before the frame around it is drawn (see app_pages/_generation_jobs.py).
ASKED_FIRST = {"generate": generation_jobs.ask_first}


def _old_attention_link() -> None:
    """/attention (links made before the default page moved to "/"): open the Attention page at "/" with the
    link's query params. A hidden page, so Streamlit serves the path instead of a "Page not found" dialog."""
    st.switch_page(pages[0], query_params=st.query_params.to_dict())


st.set_page_config(page_title="Attention Atlas", page_icon="🔭", layout="wide")
pages = [st.Page(path, title=_(title), icon=icon, url_path="" if i == 0 else name, default=(i == 0))
         for i, (path, title, icon, name) in enumerate(PAGES)]
names = {p.url_path: name for p, (_, _, _, name) in zip(pages, PAGES, strict=True)}
old_link = st.Page(_old_attention_link, title=_("Attention (old link)"), url_path=PAGES[0][3], visibility="hidden")
page = st.navigation(pages + [old_link], position="top" if shell.presenter_mode() else "sidebar")
if page is old_link:
    page.run()              # switches to the default page: nothing below runs for the old path
wanted = st.query_params.get("page")  # ?page=<name>: links from the first version name the page in a parameter
if wanted is not None and not st.session_state.get(shell.URL_READ):
    target = next((p for p in pages if names[p.url_path] == wanted.strip().strip("/")), None)
    rest = {k: v for k, v in st.query_params.to_dict().items() if k != "page"}
    if target is not None and target.url_path != page.url_path:
        st.switch_page(target, query_params=rest)
    if target is None:
        shell.link_note(_("page={page} is not a page of this app: showing {title}.").format(page=shown(wanted),
                                                                                           title=page.title))
    st.query_params.from_dict(rest)
with class_panel.turn(names[page.url_path]):    # a live class: the teacher's run first, the followers' in turns
    shell.start(names[page.url_path], before_controls=ASKED_FIRST.get(names[page.url_path]))
    try:
        page.run()
    finally:
        shell.finish()      # also after a page's st.stop(): the link still describes the view
