"""The process's memory, for a long-running server: malloc settings, giving freed heap back, pausing the cyclic
garbage collector while long-lived objects are made."""
from __future__ import annotations

import ctypes
import gc
import mmap
import sys
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8     # glibc mallopt parameters
MADV_DONTNEED = 4
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


def release_mapped(array) -> None:
    """Drop this process's resident pages of a read-only file mapping's range (a loaded tensor's raw data, copied
    into the model's own layout): they are read from the file again if touched. Loading a 0.5B Q8_0 model touched
    all 530 MB of its file on top of the weights it builds (Linux only)."""
    if sys.platform.startswith("linux") and array.nbytes:
        page = mmap.PAGESIZE
        start = array.ctypes.data - array.ctypes.data % page
        try:
            ctypes.CDLL("libc.so.6").madvise(ctypes.c_void_p(start), ctypes.c_size_t(array.ctypes.data + array.nbytes
                                                                                   - start), MADV_DONTNEED)
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
