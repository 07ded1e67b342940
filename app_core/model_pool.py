"""Loaded models within a byte budget (pure Python: no Streamlit).

A model is loaded once per identity (its file's path, mtime and size), however many sessions ask at once: each
identity has its own lock, so sessions asking for another model do not wait. Before a load, the least recently used
models are unloaded until the new one fits; a model larger than the whole budget is refused before loading.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class TooLarge(Exception):
    """A model needs more memory than the budget allows: (needed bytes, budget bytes)."""

    def __init__(self, needed: int, budget: int):
        super().__init__(needed, budget)
        self.needed, self.budget = needed, budget


class ModelPool:
    """Least-recently-used loaded models whose estimated sizes add up to at most budget_bytes."""

    def __init__(self, budget_bytes: int, on_unload: Callable[[], None] | None = None):
        self.budget_bytes = int(budget_bytes)
        self._on_unload = on_unload
        self._models: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self.loads = 0

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(size for _, size in self._models.values())

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._models)

    def peek(self, key: Hashable) -> Any:
        """The loaded model for key (counted as a use), or None."""
        with self._lock:
            entry = self._models.get(key)
            if entry is None:
                return None
            self._models.move_to_end(key)
            return entry[0]

    def get(self, key: Hashable, size: int, load: Callable[[], Any]) -> Any:
        """The model for key, loading it with load() (once, whoever else asks meanwhile) after unloading the least
        recently used models until size bytes fit. TooLarge when it can never fit."""
        model = self.peek(key)
        if model is not None:
            return model
        if size > self.budget_bytes:
            raise TooLarge(size, self.budget_bytes)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            model = self.peek(key)
            if model is not None:
                return model
            self._make_room(size)
            model = load()
            with self._lock:
                self._models[key] = (model, int(size))
                self.loads += 1
        return model

    def _make_room(self, size: int) -> None:
        unloaded = False
        with self._lock:
            total = sum(s for _, s in self._models.values())
            for key in list(self._models):
                if total + size <= self.budget_bytes:
                    break
                total -= self._models.pop(key)[1]
                unloaded = True
        if unloaded and self._on_unload is not None:
            self._on_unload()

    def clear(self) -> None:
        """Unload every model (tests; a server unloads by budget)."""
        with self._lock:
            self._models.clear()
        if self._on_unload is not None:
            self._on_unload()
