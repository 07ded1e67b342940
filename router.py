"""Attention Atlas: the router, the script each session runs (app.py serves it). The pages are app_pages'
modules (app_pages/navigation.py registers them); the frame around each (link, state, shared controls) is
app_pages/frame/shell.py."""
import streamlit as st

from app_core.link import shown
from app_pages import navigation
from app_pages.classroom import panel as class_panel
from app_pages.frame import shell
from app_pages.frame.i18n import _
from app_pages.generate import jobs as generation_jobs
from server import streamlit_fixes
from viz import plotly_lookups

plotly_lookups.import_whole()   # before any page draws: what plotly reads from sys.modules, whole (see there)
streamlit_fixes.mend()
# Work a page asks for before the frame around it is drawn (see app_pages/generate/jobs.py).
ASKED_FIRST = {"generate": generation_jobs.ask_first}


def _old_attention_link() -> None:
    """/attention (links made before the default page moved to "/"): open the Attention page at "/" with the
    link's query params. A hidden page, so Streamlit serves the path instead of a "Page not found" dialog."""
    navigation.switch_to(navigation.DEFAULT, query_params=st.query_params.to_dict())


st.set_page_config(page_title="Attention Atlas", page_icon="🔭", layout="wide")
shell.reopen_link_on_history_navigation()
pages = [navigation.page(spec.name) for spec in navigation.PAGES]
old_link = st.Page(_old_attention_link, title=_("Attention (old link)"), url_path=navigation.DEFAULT,
                   visibility="hidden")
page = st.navigation(pages + [old_link], position="top" if shell.presenter_mode() else "sidebar")
if page is old_link:
    page.run()              # switches to the default page: nothing below runs for the old path
name = navigation.name_of(page)
wanted = st.query_params.get("page")  # ?page=<name>: links from the first version name the page in a parameter
if wanted is not None and not st.session_state.get(shell.URL_READ):
    target = wanted.strip().strip("/")
    rest = {k: v for k, v in st.query_params.to_dict().items() if k != "page"}
    if target in navigation.BY_NAME and target != name:
        navigation.switch_to(target, query_params=rest)
    if target not in navigation.BY_NAME:
        shell.link_note(_("page={page} is not a page of this app: showing {title}.").format(page=shown(wanted),
                                                                                           title=page.title))
    st.query_params.from_dict(rest)
with class_panel.turn(name):    # a live class: the teacher's run first, the followers' in turns
    shell.start(name, before_controls=ASKED_FIRST.get(name))
    try:
        page.run()
    finally:
        shell.finish()      # the link describes the view (a page that stops early wrote it first: shell.stop)
