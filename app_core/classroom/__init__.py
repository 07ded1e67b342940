"""A live class: students' screens follow the teacher's view (Streamlit-free; app_pages/_class_panel.py draws it).

codes.py: join codes and the teacher's secret; store.py: the state and the store's interface; memory.py: the store
of one process; redis_store.py: the store in Redis (ATLAS_REDIS_URL), shared by replicas. class_store() gives the
process's store.
"""
from __future__ import annotations

import functools
import os

from app_core.classroom.store import ClassClosed, ClassState, ClassStore, NotTeacher, StoreUnavailable, View
from app_core.classroom.turns import Turns

REDIS_ENV = "ATLAS_REDIS_URL"

__all__ = ["REDIS_ENV", "ClassClosed", "ClassState", "ClassStore", "NotTeacher", "StoreUnavailable", "View",
           "class_store", "class_turns"]


@functools.cache
def _store_for(url: str) -> ClassStore:
    if url:
        from app_core.classroom.redis_store import RedisStore

        return RedisStore(url)
    from app_core.classroom.memory import MemoryStore

    return MemoryStore()


def class_store() -> ClassStore:
    """The store of this process: in Redis when ATLAS_REDIS_URL is set, else in memory."""
    return _store_for(os.environ.get(REDIS_ENV, "").strip())


@functools.cache
def class_turns() -> Turns:
    """The order of class page runs in this process (turns.py)."""
    return Turns()
