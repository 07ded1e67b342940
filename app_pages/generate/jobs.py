"""The Generate page's generations, asked for from the session's settings before any of the page is drawn.

A class pressing Generate at once starts thirty script runs, all Python under one GIL: each drew the sidebar's
shared controls (~10 ms of CPU) before asking for its generation, so the last of thirty asked ~1 s after the clicks
and joined the batch late (model.decoder.batching). The router asks here right after the session's settings are
settled, before the shared controls, and the run then waits up to FIRST_STEP_WAIT_S for its generation's first
step, leaving the GIL to the other runs' asks and to the batch: the thirty asked within ~0.3 s instead of ~1 s."""
from __future__ import annotations

import gc
import time

import streamlit as st

from app_core import families
from app_core import schemas as S
from app_core.budget import nbytes
from app_core.jobs import Job, JobRunner
from app_core.workspace import SHARES
from app_pages.frame import session as caches
from app_pages.frame import shell

VIEW = S.GENERATE.by_name("view")
N, GREEDY, TEMP = (S.GENERATE.by_name(n) for n in ("n", "greedy", "temp"))
TOP_K, TOP_P, SEED = (S.GENERATE.by_name(n) for n in ("top_k", "top_p", "seed"))
LOW, HIGH = S.GENERATE.by_name("low"), S.GENERATE.by_name("high")
FIRST_STEP_WAIT_S = 0.5     # at most this long after asking, before drawing the page
POLL_S = 0.01


def view_jobs(view: str, text: str, job=caches.generation_job) -> dict[str, Job]:
    """The generations the open view shows, by name, from the settings in the session (a link's or the widgets'
    values are there before the page draws anything); job(text, n, temperature, top_k, top_p, seed) makes each."""
    ss = st.session_state
    if view == "write":
        temperature = 0.0 if ss[GREEDY.key] else float(ss[TEMP.key])
        return {"": job(text, int(ss[N.key]), temperature, int(ss[TOP_K.key]), float(ss[TOP_P.key]),
                        int(ss[SEED.key]))}
    settings = (int(ss[N.key]), int(ss[TOP_K.key]), float(ss[TOP_P.key]), int(ss[SEED.key]))
    return {f"T = {float(ss[p.key]):g}": job(text, settings[0], float(ss[p.key]), *settings[1:]) for p in (LOW, HIGH)}


def current_jobs() -> dict[str, Job]:
    """The open view's generations of the session's text ({} for an empty text, or a model that writes nothing:
    a BERT); a T5 writes a target for the text (seq2seq_job)."""
    text = shell.current_text()
    family = families.family_of(caches.get_model())
    if not text.strip() or family == families.ENCODER:
        return {}
    return view_jobs(st.session_state.get(VIEW.key) or VIEW.default, text,
                     seq2seq_job if family == families.SEQ2SEQ else caches.generation_job)


@st.cache_resource(show_spinner=False)
def _seq2seq_jobs() -> JobRunner:
    return JobRunner(int(caches.cache_budget_mb() * 2**20 * SHARES["generations"]), size_of=nbytes,
                     on_evict=gc.collect, one_at_a_time=False)


def seq2seq_job(text: str, n: int, temperature: float, top_k: int, top_p: float, seed: int) -> Job:
    """A T5 writing the target of text (the source) in the background, shared by every session asking for the same
    one; job.partial holds the steps so far, job.result the Seq2SeqGeneration (model.encoders.t5_generation). The
    model's computations go one at a time: the generation holds the compute lock (a T5 step is one decoder row)."""
    ws = caches.workspace()
    if temperature == 0:
        top_k, top_p, seed = 0, 1.0, 0

    def work(job: Job):
        def on_step(step) -> bool:
            job.partial.append(step)
            return job.abandoned()
        g = ws.model.generate(text, max_new_tokens=n, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                              max_tokens=ws.max_tokens, on_step=on_step)
        return None if g.stop_reason == "cancelled" else g

    return _seq2seq_jobs().job((ws.key, text, n, temperature, top_k, top_p, seed), n, work)


def ask_first() -> None:
    """Ask for the open view's generations, then wait until each has made its first step or ended (at most
    FIRST_STEP_WAIT_S; a job already finished does not wait). The page asks again when it runs: the same jobs."""
    jobs = current_jobs().values()
    deadline = time.monotonic() + FIRST_STEP_WAIT_S
    while any(not job.partial and not job.done.is_set() for job in jobs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
