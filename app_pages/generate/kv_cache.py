"""The KV cache on the Generate page: the cache's size after each step of the generation shown, and the time of a
step with the cache against recomputing the whole prefix, measured live on this machine as the text grows.

A measurement is a moment, not a setting: it is not in the link. It runs on the user's click (it takes a few
seconds), holding the model lock so that nothing else runs on the cores meanwhile; the result is kept in the shared
byte-bounded cache for this generation, so it stays shown.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from app_core.derived.generation import kv_cache_timings
from app_pages.frame import session
from app_pages.frame.i18n import _
from app_pages.frame.widgets import show_figure
from model.calculator.params import kv_cache_bytes_per_token, shape_from_config
from viz.efficient import kv_cache_figure
from viz.format import format_bytes

REDRAW_EVERY = 4                 # steps between live redraws of the figure


def _figure(timings: list) -> object:
    timed = [t for t in timings if t.full_s is not None]
    return kv_cache_figure(np.array([t.length for t in timings]), np.array([t.cache_bytes for t in timings]),
                           np.array([t.cached_s * 1e3 for t in timings]), np.array([t.length for t in timed]),
                           np.array([t.full_s * 1e3 for t in timed]),
                           titles=(_("KV cache size after each step"), _("Time of one step")),
                           x_title=_("tokens in the text"), y_titles=(_("MiB (float32)"), _("milliseconds")),
                           names=(_("with the KV cache"), _("recomputing the whole prefix")))


def kv_cache_panel(lm, g) -> None:
    """The expander under a finished generation g."""
    with st.expander(_("The KV cache: its size, and the time of a step with and without it"),
                     icon=":material/memory:"):
        ids = list(g.prompt_ids) + list(g.new_token_ids)
        n_prompt = len(g.prompt_ids)
        cfg = lm.config
        st.caption(_("Each step feeds only the new token; the keys and values of every earlier token come from the "
                     "cache, {b} per token here ({L} layers × {kv} KV heads × {d} numbers × 2 × 4 bytes). Without "
                     "the cache the model would have to run the whole text again for every new token.").format(
            b=format_bytes(kv_cache_bytes_per_token(shape_from_config(cfg), "fp32")), L=cfg.n_layers,
            kv=cfg.n_kv_heads, d=cfg.head_dim))
        ws = session.workspace(lm)
        timings = ws.computed(kv_cache_timings, tuple(ids), n_prompt)
        if timings is None:
            if len(ids) <= n_prompt or not st.button(_("Measure on this machine"), key="gen_kv_measure",
                                                     icon=":material/timer:"):
                return
            live = st.empty()

            def redraw(so_far: list) -> None:
                if len(so_far) % REDRAW_EVERY == 1 and any(t.full_s is not None for t in so_far):
                    with live.container():
                        show_figure(_figure(so_far), key=f"gen_kv_live_{len(so_far)}", filename="kv_cache")
            timings = ws.compute(kv_cache_timings, tuple(ids), n_prompt, progress=redraw)
            live.empty()
        show_figure(_figure(list(timings)), key="gen_kv_cache", filename="kv_cache")
        last = timings[-1]
        st.caption(_("At {n} tokens one step took {cached:.0f} ms with the cache and {full:.0f} ms recomputing the "
                     "prefix. Measured live on this server's CPU, shared with everything else it runs: the times "
                     "are noisy, the trend is not.").format(n=last.length, cached=last.cached_s * 1e3,
                                                              full=(last.full_s or 0.0) * 1e3))
