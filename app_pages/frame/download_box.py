"""The model picker's download box (only where ATLAS_ALLOW_DOWNLOAD=1: a public server must not fetch what
strangers name): a repository and a file of the Hugging Face Hub (or HF_ENDPOINT's mirror), or one of a few
suggested small models; the size asked from the Hub first and checked against the models' memory budget and the
free disk, then the download with a progress bar (model/files/hub.py), then the model opens. None of its widgets is
a setting: the share link gets only the resulting ?model=<name>."""
from __future__ import annotations

import streamlit as st

from app_core import families
from app_core import models_folder as models
from app_core import schemas as S
from app_pages.frame.i18n import _
from app_pages.frame.widgets import escape_markdown
from model.files import hub
from viz.format import format_bytes

SUGGESTED = tuple((repo, name) for repo, name, _ in hub.SUGGESTED)  # small GGUFs of each family the engine reads
FAMILIES = {(repo, name): family for repo, name, family in hub.SUGGESTED}
SUGGEST, REPO, FILE, GO = "w_download_suggest", "w_download_repo", "w_download_file", "w_download_go"
NOTE = "_download_note"


def _fill_from_suggestion() -> None:
    """on_change of the suggestions: the pick fills the repository and file boxes."""
    pick = st.session_state.get(SUGGEST)
    if pick is not None and 0 <= pick < len(SUGGESTED):
        st.session_state[REPO], st.session_state[FILE] = SUGGESTED[pick]
    st.session_state[SUGGEST] = None


def suggestion_label(i: int) -> str:
    """A suggestion as the box lists it: repository · file (and the family, for an encoder or an encoder-decoder)."""
    repo, name = SUGGESTED[i]
    family = FAMILIES[(repo, name)]
    return f"{repo} · {name}" + ("" if family == families.DECODER else f" ({_(families.FAMILY_NAMES[family])})")


def refusal(size: int | None, budget: int, free: int) -> str | None:
    """Why a file of size bytes cannot be fetched here (None: it can): it must fit the models' memory budget
    (loaded, a GGUF needs at least its file's size) and the free disk."""
    if size is None:
        return None
    if size > budget:
        return _("It has {size}, more than this server's memory budget for models ({budget}, "
                 "ATLAS_MODEL_MEMORY_MB): pick a smaller file.").format(size=format_bytes(size),
                                                                         budget=format_bytes(budget))
    if size > free:
        return _("It has {size}, more than the free disk space of the models folder ({free}).").format(
            size=format_bytes(size), free=format_bytes(free))
    return None


def _fetch(where, repo_id: str, filename: str) -> None:
    """Ask the Hub for the file's size, check it, download it with a progress bar, open it."""
    folder = models.models_dir()
    try:
        remote = hub.remote_file(repo_id, filename)
        why = refusal(remote.size, models.memory_budget_bytes(), hub.free_bytes(folder))
        if why is not None:
            st.session_state[NOTE] = _("{file} was not downloaded. {reason}").format(file=remote.name, reason=why)
            return
        size = format_bytes(remote.size) if remote.size is not None else "?"
        title = _("Downloading {file} ({size})…").format(file=remote.name, size=size)
        bar = where.progress(0.0, text=title)
        path = hub.download(repo_id, filename, folder, progress=lambda fraction, message: bar.progress(
            min(1.0, fraction), text=f"{title} {fraction:.0%}"))
        bar.empty()
    except hub.DownloadError as exc:
        st.session_state[NOTE] = _("The download failed: {reason}").format(reason=exc)
        return
    info = models.info_of(path)
    if not info.ok:
        st.session_state[NOTE] = _("{file}: cannot be used. {reason}").format(file=path.name, reason=info.error)
        return
    st.session_state[NOTE] = None
    st.session_state[S.MODEL.key] = info.name
    st.rerun()


def download_box(where) -> None:
    """The download box, where the server allows downloads."""
    if not models.download_allowed():
        return
    box = where.container(border=True, key="download_box")
    box.caption(":material/download: " + _("Download a GGUF model from the Hugging Face Hub"))
    box.selectbox(_("Suggested small models"), options=list(range(len(SUGGESTED))), index=None, key=SUGGEST,
                  format_func=suggestion_label, on_change=_fill_from_suggestion,
                  placeholder=_("Pick a suggested small model…"), label_visibility="collapsed")
    box.text_input(_("Repository"), key=REPO, placeholder="Qwen/Qwen3-0.6B-GGUF", max_chars=200)
    box.text_input(_("File"), key=FILE, placeholder="Qwen3-0.6B-Q8_0.gguf", max_chars=300)
    repo_id, filename = (st.session_state.get(REPO) or "").strip(), (st.session_state.get(FILE) or "").strip()
    if box.button(_("Download"), key=GO, icon=":material/download:", disabled=not (repo_id and filename),
                  help=_("The size is asked from the Hub first and checked against this server's memory budget "
                         "for models and its free disk; then the file is downloaded, checked and opened.")):
        _fetch(box, repo_id, filename)
    if st.session_state.get(NOTE):
        box.caption(":orange[:material/warning: " + escape_markdown(st.session_state[NOTE]) + "]")
