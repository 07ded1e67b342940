"""A thread-safe cache bounded by the bytes its values hold (pure Python: no Streamlit).

A hosted server serves many sessions from one process, so caches are bounded in bytes, not entries: a 512-token
trace is ~150 MB, a 20-token one ~1 MB. Values are shared read-only objects. Several sessions asking for the same
key at once wait for one computation; an evicted value is simply computed again the next time it is asked for; a
value larger than the whole budget is still returned (a full cache never blocks anyone), just not kept.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

HOOK_SHARE = 0.25   # on_evict runs once the bytes evicted since it last ran reach this share of the budget


def nbytes(value: Any) -> int:
    """Bytes held by the numpy arrays inside value (dataclasses, dicts, lists and tuples are walked)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes(getattr(value, f.name)) for f in fields(value))
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(nbytes(v) for v in value)
    return 0


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class ByteBudgetCache:
    """Least-recently-used cache whose values together hold at most budget_bytes (measured by size_of)."""

    def __init__(self, name: str, budget_bytes: int, size_of: Callable[[Any], int] = nbytes,
                 on_evict: Callable[[], None] | None = None):
        """on_evict() runs (outside the cache's lock) once the values evicted since it last ran hold HOOK_SHARE of
        the budget: e.g. a garbage collection, so evicted values that reference cycles still hold (a plotly figure's
        traces point back at it) are freed then rather than whenever Python next looks. Not after every eviction: a
        full collection walks every object the collector tracks (~0.8 s in a test process that never froze its
        model, app_core.scheduling.freeze_long_lived), and a full figures cache evicts a figure for each new one."""
        self.name = name
        self._on_evict = on_evict
        self.budget_bytes = int(budget_bytes)
        self._size_of = size_of
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._total = 0
        self._evicted_since_hook = 0
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self.stats = CacheStats()

    @property
    def total_bytes(self) -> int:
        return self._total

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def _lookup(self, key: Hashable):
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            self.stats.hits += 1
            return entry

    def peek(self, key: Hashable) -> Any:
        """The cached value for key (counted as a use), or None when it is not cached."""
        entry = self._lookup(key)
        return None if entry is None else entry[0]

    def put(self, key: Hashable, value: Any) -> None:
        """Keep value for key (within the budget, evicting the least recently used)."""
        self._store(key, value)

    def get(self, key: Hashable, compute: Callable[[], Any], expected_bytes: int = 0) -> Any:
        """The cached value for key, or compute() (once, even when several threads ask at the same time).
        expected_bytes: the value's size when known in advance; room is made before computing, so the old values
        and the new one are never all in memory at once."""
        entry = self._lookup(key)
        if entry is not None:
            return entry[0]
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            entry = self._lookup(key)                  # another thread may have computed it meanwhile
            if entry is not None:
                return entry[0]
            if expected_bytes:
                self._make_room(int(expected_bytes))
            value = compute()
            self._store(key, value)
        with self._lock:
            self._key_locks.pop(key, None)
        return value

    def _evict_for(self, size: int) -> None:
        """Drop least recently used values until size more bytes fit (call with the lock held)."""
        while self._entries and self._total + size > self.budget_bytes:
            _, (_, old_size) = self._entries.popitem(last=False)
            self._total -= old_size
            self._evicted_since_hook += old_size
            self.stats.evictions += 1

    def _hook_due(self) -> bool:
        """Whether on_evict should run now (call with the lock held; the count starts again)."""
        if self._on_evict is None or self._evicted_since_hook < HOOK_SHARE * self.budget_bytes:
            return False
        self._evicted_since_hook = 0
        return True

    def _make_room(self, size: int) -> None:
        with self._lock:
            self._evict_for(min(size, self.budget_bytes))
            hook_due = self._hook_due()
        if hook_due:
            self._on_evict()

    def _store(self, key: Hashable, value: Any) -> None:
        size = int(self._size_of(value))
        with self._lock:
            self.stats.misses += 1
            if size > self.budget_bytes:
                return
            self._evict_for(size)
            self._entries[key] = (value, size)
            self._total += size
            hook_due = self._hook_due()
        if hook_due:
            self._on_evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._total = 0
