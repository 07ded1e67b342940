"""The Generate page's generations, asked for from the session's settings before any of the page is drawn.

A class pressing Generate at once starts thirty script runs, all Python under one GIL: each drew the sidebar's
shared controls (~10 ms of CPU) before asking for its generation, so the last of thirty asked ~1 s after the clicks
and joined the batch late (model.decoder.batching). The router asks here right after the session's settings are
settled, before the shared controls, and the run then waits up to FIRST_STEP_WAIT_S for its generation's first
step, leaving the GIL to the other runs' asks and to the batch: the thirty asked within ~0.3 s instead of ~1 s."""
from __future__ import annotations

import time

import streamlit as st

from app_core import schemas as S
from app_core.jobs import Job
from app_pages.frame import session as caches
from app_pages.frame import shell

VIEW = S.GENERATE.by_name("view")
N, GREEDY, TEMP = (S.GENERATE.by_name(n) for n in ("n", "greedy", "temp"))
TOP_K, TOP_P, SEED = (S.GENERATE.by_name(n) for n in ("top_k", "top_p", "seed"))
LOW, HIGH = S.GENERATE.by_name("low"), S.GENERATE.by_name("high")
FIRST_STEP_WAIT_S = 0.5     # at most this long after asking, before drawing the page
POLL_S = 0.01


def view_jobs(view: str, text: str) -> dict[str, Job]:
    """The generations the open view shows, by name, from the settings in the session (a link's or the widgets'
    values are there before the page draws anything)."""
    ss = st.session_state
    if view == "write":
        temperature = 0.0 if ss[GREEDY.key] else float(ss[TEMP.key])
        return {"": caches.generation_job(text, int(ss[N.key]), temperature, int(ss[TOP_K.key]),
                                          float(ss[TOP_P.key]), int(ss[SEED.key]))}
    settings = (int(ss[N.key]), int(ss[TOP_K.key]), float(ss[TOP_P.key]), int(ss[SEED.key]))
    return {f"T = {float(ss[p.key]):g}": caches.generation_job(text, settings[0], float(ss[p.key]), *settings[1:])
            for p in (LOW, HIGH)}


def current_jobs() -> dict[str, Job]:
    """The open view's generations of the session's text ({} for an empty text)."""
    text = shell.current_text()
    return view_jobs(st.session_state.get(VIEW.key) or VIEW.default, text) if text.strip() else {}


def ask_first() -> None:
    """Ask for the open view's generations, then wait until each has made its first step or ended (at most
    FIRST_STEP_WAIT_S; a job already finished does not wait). The page asks again when it runs: the same jobs."""
    jobs = current_jobs().values()
    deadline = time.monotonic() + FIRST_STEP_WAIT_S
    while any(not job.partial and not job.done.is_set() for job in jobs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
