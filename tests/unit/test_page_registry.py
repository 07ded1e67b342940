"""The app's pages (app_pages/navigation.py): each a module imported once whose render() draws it, with the settings
schema of its name; a page's st.Page is the one st.navigation registered (Streamlit knows a page by its url_path)."""
import importlib
import inspect

from streamlit.testing.v1 import AppTest

from app_core import schemas as S
from app_pages import navigation


def test_every_page_has_a_documented_render_and_a_schema():
    assert [spec.name for spec in navigation.PAGES][:1] == ["attention"] == [navigation.DEFAULT]
    assert len(navigation.BY_NAME) == len(navigation.PAGES) == 11
    for spec in navigation.PAGES:
        render = importlib.import_module(spec.module).render
        assert not inspect.signature(render).parameters and inspect.getdoc(render), spec.module
        assert S.schema(spec.name).page == spec.name


def test_switch_to_opens_a_page_by_its_name():
    """A page switches to another by name (no file path), landing on that page's own view."""
    def script():
        import streamlit as st

        from app_pages import navigation

        def first():
            st.write("first")
            if st.button("go", key="go"):
                navigation.switch_to("causal-mask", query_params={"x": "1"})

        def second():
            st.write("second")
        pages = [st.Page(first, title="A", url_path="", default=True),
                 st.Page(second, title="B", url_path="causal-mask")]
        st.navigation(pages).run()

    at = AppTest.from_function(script).run()
    assert [m.value for m in at.markdown] == ["first"]
    at.button(key="go").click().run()
    assert [m.value for m in at.markdown] == ["second"] and at.query_params["x"] == "1"
