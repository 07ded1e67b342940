"""The app's pages: each a module of app_pages whose render() draws it, registered with st.navigation as a function,
so a page module is imported once per process (it may hold classes and helpers) and a run calls its render().

A page's name is its URL path and its settings' schema's name, except that the first (default) page is served at "/"
only: Streamlit ignores a default page's url_path, so it is registered with url_path "" and share links use "/?...".
Other modules reach a page by its name (switch_to, link_to), never by a file path.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import streamlit as st

from app_pages.frame.i18n import N_, _


@dataclass(frozen=True)
class PageSpec:
    name: str          # its URL path and its schema's name
    title: str         # N_-marked: translated where it is shown
    icon: str
    module: str        # the module whose render() draws it


PAGES = (
    PageSpec("attention", N_("Attention"), ":material/grid_on:", "app_pages.attention"),
    PageSpec("causal-mask", N_("Causal mask"), ":material/change_history:", "app_pages.causal_mask"),
    PageSpec("softmax", N_("Softmax & temperature"), ":material/thermostat:", "app_pages.softmax"),
    PageSpec("generate", N_("Generate"), ":material/edit:", "app_pages.generate.page"),
    PageSpec("inside", N_("Inside a block"), ":material/account_tree:", "app_pages.inside.page"),
    PageSpec("positional", N_("Positional encodings"), ":material/waves:", "app_pages.positional"),
    PageSpec("efficient", N_("Efficient attention"), ":material/speed:", "app_pages.efficient"),
    PageSpec("parameters", N_("Parameters"), ":material/calculate:", "app_pages.calculator"),
    PageSpec("train", N_("Train"), ":material/model_training:", "app_pages.train.page"),
    PageSpec("lessons", N_("Lessons"), ":material/school:", "app_pages.lessons"),
    PageSpec("circuits", N_("Circuits"), ":material/hub:", "app_pages.circuits"),
)
BY_NAME = {spec.name: spec for spec in PAGES}
DEFAULT = PAGES[0].name


def url_path(name: str) -> str:
    """The page's registered url_path ("" for the default page)."""
    return "" if name == DEFAULT else name


def page(name: str) -> st.Page:
    """The st.Page of a page by its name, titled in the session's language (equal to the one st.navigation
    registered: Streamlit knows a page by its url_path)."""
    spec = BY_NAME[name]
    render = importlib.import_module(spec.module).render
    return st.Page(render, title=_(spec.title), icon=spec.icon, url_path=url_path(name), default=name == DEFAULT)


def name_of(registered: st.Page) -> str:
    """The name of a registered page."""
    return registered.url_path or DEFAULT


def switch_to(name: str, query_params: dict | None = None) -> None:
    """Open another page (ends this run)."""
    st.switch_page(page(name), query_params=query_params or {})


def link_to(name: str, label: str, icon: str | None = None, query_params: dict | None = None) -> None:
    """A link to another page."""
    st.page_link(page(name), label=label, icon=icon, query_params=query_params)
