"""What the Generate page measures: the time of each step of a generation with the KV cache and recomputing the
whole prefix (a moment on this machine, not a setting), with the machine to itself meanwhile."""
from __future__ import annotations

from collections.abc import Callable

from model.analysis.kv_cache_timing import StepTiming, time_steps

FULL_TIMINGS = 12                # full recomputes measured per generation (each costs a whole pass)


def kv_cache_timings(ws, ids: tuple[int, ...], n_prompt: int,
                     progress: Callable[[list[StepTiming]], None] | None = None) -> tuple[StepTiming, ...]:
    """Every step's timing of the text ids after its first n_prompt tokens; progress(timings so far) after each."""
    timings: list[StepTiming] = []
    every = max(1, (len(ids) - n_prompt) // FULL_TIMINGS)
    with ws.alone():
        for timing in time_steps(ws.lm, list(ids), n_prompt, full_every=every):
            timings.append(timing)
            if progress is not None:
                progress(timings)
    return tuple(timings)
