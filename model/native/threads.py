"""How many threads a native kernel call is split across: ATLAS_KERNEL_THREADS, else every core this process may use.

Not torch's count: the app keeps torch off one core (app_pages._caches.compute_threads), because torch's worker
threads wait for each other at every operation and one of them losing its core to a browser or another session
stalls them all. The kernels' pool (worker_pool.h) has no such wait: the caller and the workers take chunks from one
counter, so a worker that loses its core costs at most the chunk it holds. Measured with 30 concurrent 32-token
generations (SmolLM2, 2 cores): 3.5 s on two threads against 6.2 s on one; with a busy process on one of the cores,
6.5 s against 6.4 s.
"""
from __future__ import annotations

import os


def kernel_threads() -> int:
    """Threads for one kernel call: ATLAS_KERNEL_THREADS when it is a positive count, else the usable cores."""
    return threads_from_environment("ATLAS_KERNEL_THREADS") or usable_cores()


def threads_from_environment(name: str) -> int | None:
    """The positive count environment variable `name` holds, else None."""
    raw = os.environ.get(name, "")
    return int(raw) if raw.strip().isdigit() and int(raw) > 0 else None


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
