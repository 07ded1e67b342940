"""The interface language: `_(message)` and `ngettext(singular, plural, n)` translate into the current session's
language, looked up per call (sessions in one process each keep their own; nothing process-global is switched).

The language is, in order: the session's choice (the header's switch, or `lang` in the link: state key LANG_KEY),
`lang` in the link on a session's first run, the browser's language (`st.context.locale`), English. Catalogs are
gettext .mo files compiled from locale/<lang>/LC_MESSAGES/messages.po (`pybabel compile -d locale`), read once per
process per language. `N_` marks a message defined at import time, translated where it is shown.
"""
from __future__ import annotations

import gettext
import threading
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from viz.text import N_  # noqa: F401  (pages mark import-time messages with it; so do _schemas.py and viz/)

LOCALE_DIR = Path(__file__).resolve().parents[2] / "locale"
DOMAIN = "messages"
LANGUAGES = {"en": "English", "zh": "中文"}       # code in the link -> the switch's label
CATALOGS = {"zh": "zh_CN"}                         # code -> the catalog's directory under locale/
DEFAULT = "en"
LANG_KEY = "lang"                                  # state key and link parameter
RUN_LANGUAGE = "_atlas_language"                   # on the run's context: (its run, the language)

_lock = threading.Lock()
_loaded: dict[str, gettext.NullTranslations] = {}


def translations(lang: str) -> gettext.NullTranslations:
    """The catalog of a language, read once per process (identity for English or a missing catalog)."""
    found = _loaded.get(lang)
    if found is None:
        with _lock:
            found = _loaded.get(lang)
            if found is None:
                found = gettext.translation(DOMAIN, LOCALE_DIR, [CATALOGS.get(lang, lang)], fallback=True)
                _loaded[lang] = found
    return found


def language_of_locale(locale: str | None) -> str:
    """'zh' for a Chinese browser locale (zh, zh-CN, zh-Hans-...), else English."""
    return "zh" if (locale or "").lower().replace("_", "-").split("-")[0] == "zh" else DEFAULT


def language() -> str:
    """The current session's language code (English outside a script run); worked out once per script run (each
    of a run's hundred or so messages asked the session state, the link and the browser's locale: ~14 µs each). Only
    the header's switch changes it, in its callback, before the run."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return DEFAULT
    run = ctx.cursors                 # a new dict at each run's start (ScriptRunContext.reset): this run
    known = getattr(ctx, RUN_LANGUAGE, None)
    if known is None or known[0] is not run:
        known = (run, _session_language())
        setattr(ctx, RUN_LANGUAGE, known)
    return known[1]


def _session_language() -> str:
    chosen = st.session_state.get(LANG_KEY)
    if chosen in LANGUAGES:
        return chosen
    linked = st.query_params.get(LANG_KEY)
    if linked in LANGUAGES:
        return linked
    try:
        return language_of_locale(st.context.locale)
    except Exception:                                  # no browser behind this run (a bare script, a test)
        return DEFAULT


def _(message: str) -> str:
    """The message in the session's language."""
    return translations(language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural message for n, in the session's language."""
    return translations(language()).ngettext(singular, plural, n)


def translated(words):
    """A viz words dataclass (viz/text.py) with every field (nested ones too) in the session's language."""
    catalog = translations(language())

    def one(value):
        return translated(value) if is_dataclass(value) else catalog.gettext(value)
    return replace(words, **{f.name: one(getattr(words, f.name)) for f in fields(words)})
