"""The Train page's state and jobs (no drawing): the settings in the session's state as TrainSettings, the comparison
presets' callback, and training runs as background jobs shared by every session: one run per TrainSettings on the
whole server (a class opening the teacher's link costs one run), its partial results readable while it trains,
finished runs kept in a byte-bounded cache.

A run trains on one torch thread (model.train.trainer.TRAIN_THREADS, thread-local: the app's other computations
keep theirs) and does not take the model's COMPUTE lock: it leaves the other core to the server. Runs queue one at
a time. A run no page has polled for IDLE_STOP_S stops at its next log point and is not kept.
"""
from __future__ import annotations

import gc
from collections.abc import Callable, Hashable
from dataclasses import replace

import streamlit as st

from app_core import schemas as S
from app_core.jobs import Job, JobRunner
from app_pages.frame import session as caches
from app_pages.frame.widgets import FIGURE_BYTES
from model.train import PRESETS, TrainRun, TrainSettings
from server.streamlit_fixes import freeze_figure

TRAIN_SHARE = 0.05            # of the app's cache budget (ATLAS_CACHE_MB), for finished runs
IDLE_STOP_S = 10.0            # pages poll every 0.4 s while a run trains (a slow page run or a background tab: less)


# TrainSettings field -> the name of its setting in the Train schema (the text is the shared text setting)
FIELDS = {"task": "task", "n_layers": "layers", "d_model": "d", "n_heads": "heads", "n_kv_heads": "kv", "mlp": "mlp",
          "norm": "norm", "norm_place": "place", "positions": "pos", "vocab_size": "vocab", "seq_len": "seq",
          "steps": "steps", "batch_size": "batch", "lr": "lr", "warmup": "warmup", "cosine": "cosine",
          "grad_clip": "clip", "weight_decay": "wd", "init_scale": "init", "seed": "seed"}


def key_of(field: str) -> str:
    """The state key of a TrainSettings field's setting."""
    return S.TRAIN.by_name(FIELDS[field]).key


def settings_of(state) -> TrainSettings:
    """The settings in the state (the text only for the text task, so it never splits other runs); ValueError with
    a message for the user when they cannot be trained."""
    values = {field: state.get(key_of(field), getattr(S.TRAIN_DEFAULTS, field)) for field in FIELDS}
    text = state.get(S.TEXT.key, "") if values["task"] == "text" else ""
    return TrainSettings(text=text if isinstance(text, str) else "", **values)


def runs_of(state) -> dict[str, TrainSettings]:
    """The runs to show: {"": settings}, or with a comparison preset {"a": ..., "b": ...}: the settings with the
    preset's field at its two values."""
    s = settings_of(state)
    preset = PRESETS.get(state.get(S.TRAIN.by_name("cmp").key))
    if preset is None:
        return {"": s}
    return {side: replace(s, **{preset.field: getattr(getattr(preset, side), preset.field)}) for side in ("a", "b")}


def apply_preset() -> None:
    """on_change of the comparison picker: a preset sets every setting to its runs' shared settings."""
    ss = st.session_state
    preset = PRESETS.get(ss.get(S.TRAIN.by_name("cmp").key))
    if preset is None:
        return
    for field in FIELDS:
        ss[key_of(field)] = getattr(preset.b, field)
    ss[S.TRAIN.by_name("at").key] = None


@st.cache_resource(show_spinner=False)
def _runner() -> JobRunner:
    return JobRunner(int(caches.cache_budget_mb() * 2**20 * TRAIN_SHARE), size_of=lambda run: run.nbytes,
                     on_evict=gc.collect)


def training_job(settings: TrainSettings) -> Job:
    """The run of these settings: finished (cached), training, or started now. job.partial has one entry per log
    point so far; only the last is kept (the latest partial TrainRun, which holds every earlier log point)."""
    from model.train.trainer import n_logs, train

    def work(job: Job) -> TrainRun | None:
        def on_log(run: TrainRun) -> bool:
            job.partial.append(run)
            if len(job.partial) > 1:
                job.partial[-2] = None                   # after the append: a reader always finds the newest
            return job.abandoned(IDLE_STOP_S)

        run = train(settings, on_log=on_log)
        return None if run.cancelled else run

    return _runner().job(settings, n_logs(settings.steps), work)


def ahead(job: Job) -> int:
    """How many runs train or wait before this one (0 once it trains)."""
    return _runner().ahead(job)


def latest(job: Job) -> TrainRun | None:
    """The finished run, else the newest partial run (None before the first log point)."""
    if job.result is not None:
        return job.result
    return job.partial[-1] if job.partial else None


def shared_figure(key: Hashable, build: Callable[[], object]) -> object:
    """The figure for key, built once for every session that shows the same run at the same log point (a class
    watching one run live asks for the same figures ~2.5 times a second each), kept in the shared figures' cache.
    Frozen once built (its dict and JSON made once, not at each session's poll: server/streamlit_fixes.py)."""
    def make() -> tuple:
        fig = build()
        return fig, freeze_figure(fig) + FIGURE_BYTES
    return caches.caches()["figures"].get(("train", key), make)[0]
