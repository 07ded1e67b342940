"""The server's default model in a session (app_core/default_model.py): a progress bar while the server fetches it,
its ModelInfo once it is there, the reason when it could not be had (the session then shows the built-in model)."""
from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app_core import default_model as dm
from app_core import models_folder as models
from app_pages.frame.i18n import _


def configured() -> str | None:
    """ATLAS_DEFAULT_MODEL's value when the server has one."""
    default = dm.current()
    return None if default is None else default.raw.strip()


def ready_info() -> models.ModelInfo | None:
    """The default model's info when it is in the models folder now (no waiting), else None."""
    default = dm.current()
    status = None if default is None else default.status()
    return models.resolve(status.name) if status is not None and status.state == dm.READY else None


def default_info() -> tuple[models.ModelInfo | None, str | None]:
    """(the default model's info, None); (None, why it cannot be used); (None, None) when the server has none.
    While it is being fetched, a script run shows a progress bar and waits; the warm-up thread just waits."""
    default = dm.current()
    if default is None:
        return None, None
    status = default.status()
    if status.state == dm.FETCHING:
        if get_script_run_ctx(suppress_warning=True) is None:
            status = default.wait()
        else:
            title = _("Fetching this server's default model {model} (first start only)…").format(model=default.raw)
            bar = st.progress(0.0, text=title)
            status = dm.poll(default, lambda s: bar.progress(min(1.0, s.fraction),
                                                             text=f"{title} {s.fraction:.0%}"))
            bar.empty()
    if status.state == dm.FAILED:
        return None, status.error
    info = models.resolve(status.name or "")
    if info is None:
        return None, _("{model} is no longer in the models folder.").format(model=status.name)
    return info, None
