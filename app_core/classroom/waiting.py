"""A follower's wait for the teacher's next view, on the server's event loop (no script run while nothing changes).

A following browser asks over HTTP (app_pages/_class_wait.py) "has the view changed since version `seen`?"; the
answer comes as soon as it has and no teacher's run of the class is going on in this process (turns.py: the
teacher's run and its last messages go out before sixty followers ask for theirs), or after `timeout_s` with the
same version (the browser asks again; each ask is the follower's heartbeat). One watcher per class with waiting
followers reads the store's version every `every_s` (a dict read in memory; with Redis one read per class, not per
follower, and a teacher on another replica is seen that way), so an idle follower costs a held connection.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from app_core.classroom.store import ClassStore, StoreUnavailable

EVERY_S = 0.05            # the watcher's read of a class's version in this process's memory
EVERY_NETWORKED_S = 0.2   # ... in a store on the network (Redis): a teacher on another replica
MAX_WAITING = 4096        # followers waiting in this process at once; more are told to come back (Busy)


class Busy(RuntimeError):
    """Too many followers wait in this process: ask again later."""


class ViewWaits:
    """Followers waiting for a class's next view (see the module's docstring). One per event loop."""

    def __init__(self, store: ClassStore, until_teacher_done: Callable[[str], float], every_s: float | None = None,
                 max_waiting: int = MAX_WAITING):
        self._store, self._until_teacher_done = store, until_teacher_done
        self._every_s = every_s if every_s is not None else EVERY_NETWORKED_S if store.networked else EVERY_S
        self._max_waiting = max_waiting
        self._waiting: dict[str, dict[asyncio.Future, int]] = {}      # code -> {a waiter's future: its seen version}
        self._watchers: dict[str, asyncio.Task] = {}

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    async def call(self, method: Callable, *args):
        """A store call: in a thread when the store is on the network (the event loop never waits on a socket)."""
        return await asyncio.to_thread(method, *args) if self._store.networked else method(*args)

    async def wait(self, code: str, seen: int, timeout_s: float) -> int | None:
        """The class's version once it differs from seen (and its teacher's run here is done), or seen after
        timeout_s; None when no open class has the code. StoreUnavailable, Busy."""
        version = await self.call(self._store.version, code)
        if version is None or (version != seen and self._until_teacher_done(code) <= 0):
            return version
        if self.waiting >= self._max_waiting:
            raise Busy(f"{self.waiting} followers are waiting in this process")
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(code, {})[future] = seen
        if code not in self._watchers:
            self._watchers[code] = asyncio.create_task(self._watch(code))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return seen
        finally:
            waiters = self._waiting.get(code, {})
            waiters.pop(future, None)
            if not waiters:
                self._waiting.pop(code, None)

    async def _watch(self, code: str) -> None:
        """Reads the class's version while followers wait for it; answers those who have not seen it."""
        try:
            while self._waiting.get(code):
                await asyncio.sleep(self._every_s)
                try:
                    version = await self.call(self._store.version, code)
                except StoreUnavailable:                  # the waiters time out and ask again
                    continue
                waiters = self._waiting.get(code, {})
                changed = [f for f, seen in waiters.items() if seen != version and not f.done()]
                if changed and self._until_teacher_done(code) <= 0:
                    for future in changed:
                        future.set_result(version)
        finally:
            self._watchers.pop(code, None)
