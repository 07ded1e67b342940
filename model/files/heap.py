"""The process's memory, for a long-running server: malloc settings, giving freed heap back, pausing the cyclic
garbage collector while long-lived objects are made."""
from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8     # glibc mallopt parameters
HEAP_MMAP_BYTES = 1 << 20       # blocks from 1 MB up get their own mapping, returned to the OS when freed


def tune_heap() -> None:
    """For a long-running server (glibc only): large arrays (traces, figures) come from their own mappings and go
    back to the OS when freed, instead of growing a fragmented heap; at most two malloc arenas for the many
    session threads; free heap memory at the top is trimmed early."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_BYTES)
            libc.mallopt(M_TRIM_THRESHOLD, 4 * HEAP_MMAP_BYTES)
            libc.mallopt(M_ARENA_MAX, 2)
        except (OSError, AttributeError):
            pass


def release_free_heap() -> None:
    """Hand the heap holes that loading left (dequantization temporaries, ~90 MB) back to the OS (glibc only)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


@contextmanager
def paused_gc() -> Iterator[None]:
    """No automatic garbage collection inside (restored on exit, unless it was off already). Making the model's
    ~300k long-lived objects (vocabulary, merges, tokenizer tables) set off full collections that walked every
    object of the process, torch's included, again and again: 0.25-0.4 s of a 0.75 s load. Nothing is lost: the
    collector runs as usual afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
