"""How many threads a native kernel call is split across: ATLAS_KERNEL_THREADS, else every core this process may use.

Not torch's count: the app keeps torch off one core (app_core.scheduling.compute_threads), because torch's worker
threads wait for each other at every operation and one of them losing its core to a browser or another session
stalls them all. The kernels' pool (worker_pool.h) has no such wait: the caller and the workers take chunks from one
counter, so a worker that loses its core costs at most the chunk it holds. Measured with 30 concurrent 32-token
generations (SmolLM2, 2 cores): 3.5 s on two threads against 6.2 s on one; with a busy process on one of the cores,
6.5 s against 6.4 s.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator


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


@contextlib.contextmanager
def torch_on_calling_thread(active: bool = True) -> Iterator[None]:
    """While active, torch's operations in this thread run on this thread alone (its OpenMP team size and MKL's
    thread count for this thread set to 1, then put back; other threads keep theirs). For a pass whose matrix
    products run on the kernels' pool: torch's team spinning between its operations took the pool's cores (a
    64-token trace of Qwen2.5-0.5B's shapes 0.78-0.90 s with torch on 2 threads, 0.63 s so)."""
    runtime = _torch_runtime() if active else None
    if runtime is None:
        yield
        return
    import torch

    torch.get_num_threads()            # torch sets a thread's counts at its first use: before ours, not after
    team = runtime.omp_get_max_threads()
    mkl = runtime.MKL_Set_Num_Threads_Local(1)
    runtime.omp_set_num_threads(1)
    try:
        yield
    finally:
        runtime.omp_set_num_threads(team)
        runtime.MKL_Set_Num_Threads_Local(mkl)


@functools.cache
def _torch_runtime() -> ctypes.CDLL | None:
    """torch's CPU library, through which its OpenMP runtime and MKL are reached; None where either is missing."""
    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        runtime = ctypes.CDLL(path)
        for name in ("omp_get_max_threads", "omp_set_num_threads", "MKL_Set_Num_Threads_Local"):
            getattr(runtime, name).restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return runtime



def team_threads(torch_threads: int) -> tuple[int, int]:
    """(threads, on torch's team) for a kernel called between torch's operations in a thread where torch runs on
    torch_threads threads: from 2 up, that many on torch's own OpenMP team (its threads still spin from torch's
    previous operation; a pool worker on the same core got half of it: worker_pool.h's team_items), else
    kernel_threads() on the kernels' pool."""
    if torch_threads > 1 and _registered_torch_team():
        return torch_threads, 1
    return kernel_threads(), 0


@functools.cache
def _registered_torch_team() -> bool:
    """Registers GOMP_parallel of the OpenMP runtime torch loaded (torch/lib/libgomp.so.1: the same library, so the
    same thread team) with the kernels' library, once; False where torch ships another runtime or none, or the
    kernels are not built."""
    import torch

    from model.native.build import library

    lib = library()
    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp.so.1")
    try:
        entry = ctypes.cast(ctypes.CDLL(path).GOMP_parallel, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return False
    if lib is None or not entry:
        return False
    lib.use_torch_team.argtypes = [ctypes.c_void_p]
    lib.use_torch_team.restype = None
    lib.use_torch_team(entry)
    return True
