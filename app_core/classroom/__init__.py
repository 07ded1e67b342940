"""A live class: students' screens follow the teacher's view (Streamlit-free; app_pages/classroom/panel.py draws it).

codes.py: join codes, the teacher's secret and tickets; followers.py: signed follower ids; store.py: the state and
the store's interface; memory.py: the store of one process; redis_store.py: the store in Redis (ATLAS_REDIS_URL),
shared by replicas. class_store() gives the process's store (and starts its sweeper: every SWEEP_S a thread forgets
expired and ended classes, stale heartbeats and spent tickets); follower_key() the key follower ids are signed with.
"""
from __future__ import annotations

import functools
import os
import threading

from app_core.classroom import followers
from app_core.classroom.store import (
    MAX_CLASSES,
    ClassClosed,
    ClassesFull,
    ClassState,
    ClassStore,
    NotTeacher,
    StoreUnavailable,
    View,
)
from app_core.classroom.turns import Turns

REDIS_ENV = "ATLAS_REDIS_URL"
MAX_CLASSES_ENV = "ATLAS_MAX_CLASSES"
SWEEP_S = 60.0

__all__ = ["MAX_CLASSES_ENV", "REDIS_ENV", "ClassClosed", "ClassState", "ClassStore", "ClassesFull", "NotTeacher",
           "StoreUnavailable", "View", "class_store", "class_turns", "follower_key"]


def max_classes() -> int:
    """ATLAS_MAX_CLASSES (a positive whole number), else MAX_CLASSES."""
    text = os.environ.get(MAX_CLASSES_ENV, "").strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else MAX_CLASSES


def sweep_every(store: ClassStore, every_s: float = SWEEP_S) -> threading.Event:
    """A daemon thread that calls store.sweep() every every_s (a store that cannot be reached is tried again at the
    next); set the returned event to stop it."""
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(every_s):
            try:
                store.sweep()
            except StoreUnavailable:
                continue
    threading.Thread(target=sweep, name="class-sweeper", daemon=True).start()
    return stop


@functools.cache
def _store_for(url: str, most: int) -> ClassStore:
    if url:
        from app_core.classroom.redis_store import RedisStore

        store = RedisStore(url, max_classes=most)
    else:
        from app_core.classroom.memory import MemoryStore

        store = MemoryStore(max_classes=most)
    sweep_every(store)
    return store


def class_store() -> ClassStore:
    """The store of this process: in Redis when ATLAS_REDIS_URL is set, else in memory."""
    return _store_for(os.environ.get(REDIS_ENV, "").strip(), max_classes())


def follower_key() -> bytes:
    """The key follower ids are signed with: from ATLAS_CLASS_KEY when set, else the store's. StoreUnavailable."""
    text = os.environ.get(followers.KEY_ENV, "")
    return _configured_key(text) if text else class_store().shared_key()


_configured_key = functools.cache(followers.key_from_text)


@functools.cache
def class_turns() -> Turns:
    """The order of class page runs in this process (turns.py)."""
    return Turns()
