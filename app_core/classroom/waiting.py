"""A follower's wait for the teacher's next view, on the server's event loop (no script run while nothing changes).

A following browser asks over HTTP (server/class_wait.py) "has the view changed since version `seen`?"; the
answer comes as soon as it has and no teacher's run of the class is going on in this process (turns.py: the
teacher's run and its last messages go out before sixty followers ask for theirs), or after `timeout_s` with the
same version (the browser asks again; each ask is the follower's heartbeat). One watcher per class with waiting
followers reads the store's version every `every_s` (a dict read in memory; with Redis one read per class, not per
follower, and a teacher on another replica is seen that way), so an idle follower costs a held connection.

Bounded, and nobody is turned away: a follower id holds one wait (a new ask answers its previous one at once,
unchanged), a class at most `per_class` (one more answers the class's oldest wait at once, unchanged: its browser
asks again), the process at most `max_waiting` (one more answers the oldest wait of the class with the most). A
flood on one class so leaves every other class its room, and its own followers their turn; it costs the flood's
own asks, which the proxy's per-address rate limit bounds (deploy/haproxy.cfg). The same holds for the threads that
call a networked store: one class's calls pass its own gate, CALLS_PER_CLASS at a time (ViewWaits.call).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from app_core.classroom.store import ClassStore, StoreUnavailable

EVERY_S = 0.05            # the watcher's read of a class's version in this process's memory
EVERY_NETWORKED_S = 0.1   # ... in a store on the network (Redis): a teacher on another replica (one HGET a class)
MAX_WAITING = 4096        # followers waiting in this process at once; more are told to come back (Busy)
MAX_WAITING_PER_CLASS = 512   # ... of one class
CALLS_PER_CLASS = 2       # one class's store calls in threads at once (waits on a networked store: ViewWaits.call)
PREPARE_WAIT_S = 5.0      # the longest the followers wait for a new view to be prepared (a longer one goes on)
LOG = logging.getLogger("attention_atlas.class_waits")


@dataclass
class _Gate:
    """A class's store calls: the semaphore they pass, and how many hold or wait for it."""

    semaphore: asyncio.Semaphore
    users: int = 0


class Busy(RuntimeError):
    """No wait can be held in this process (max_waiting 0): ask again later."""


class ViewWaits:
    """Followers waiting for a class's next view (see the module's docstring). One per event loop."""

    def __init__(self, store: ClassStore, until_teacher_done: Callable[[str], float], every_s: float | None = None,
                 max_waiting: int = MAX_WAITING, per_class: int = MAX_WAITING_PER_CLASS,
                 prepare: Callable[[str], object] | None = None, prepare_wait_s: float = PREPARE_WAIT_S):
        self._store, self._until_teacher_done = store, until_teacher_done
        self._prepare, self._prepare_wait_s = prepare, prepare_wait_s
        self._preparing: dict[str, tuple[int, asyncio.Task]] = {}     # code -> (version, its preparation)
        self._every_s = every_s if every_s is not None else EVERY_NETWORKED_S if store.networked else EVERY_S
        self._max_waiting, self._per_class = max_waiting, per_class
        self._waiting: dict[str, dict[str, tuple[asyncio.Future, int]]] = {}   # code -> follower -> (future, seen)
        self._count = 0
        self._watchers: dict[str, asyncio.Task] = {}
        self._gates: dict[str, _Gate] = {}                             # code -> its store calls' gate (while used)

    @property
    def waiting(self) -> int:
        return self._count

    def waiting_on(self, code: str) -> int:
        return len(self._waiting.get(code, ()))

    async def call(self, method: Callable, code: str, *args):
        """A store call about class code, method(code, *args): in a thread when the store is on the network (the event
        loop never waits on a socket), at most CALLS_PER_CLASS of one class at a time. The threads are few (asyncio's
        default: the cores + 4); a flood of one class's asks so queues at its own gate, on the loop, instead of ahead
        of every other class's asks and watchers in the threads' one queue."""
        if not self._store.networked:
            return method(code, *args)
        gate = self._gates.get(code)
        if gate is None:
            gate = self._gates[code] = _Gate(asyncio.Semaphore(CALLS_PER_CLASS))
        gate.users += 1
        try:
            async with gate.semaphore:
                return await asyncio.to_thread(method, code, *args)
        finally:
            gate.users -= 1
            if not gate.users:
                del self._gates[code]

    async def wait(self, code: str, follower: str, seen: int, timeout_s: float) -> int | None:
        """The class's version once it differs from seen (and its teacher's run here is done), or seen after
        timeout_s (or when the same follower asks again); None when no open class has the code. StoreUnavailable,
        Busy."""
        version = await self.call(self._store.version, code)
        if version is None:
            return None
        if version != seen and self._until_teacher_done(code) <= 0:
            await self._prepared(code, version)
            return version
        waiters = self._waiting.setdefault(code, {})
        if follower in waiters:
            self._answer_oldest(waiters, follower)       # its previous ask
        if len(waiters) >= self._per_class:
            self._answer_oldest(waiters)
        elif self._count >= self._max_waiting:
            most = max(self._waiting.values(), key=len)
            if not most:
                del self._waiting[code]
                raise Busy(f"{self._count} followers wait in this process (at most {self._max_waiting})")
            self._answer_oldest(most)
        future = asyncio.get_running_loop().create_future()
        waiters[follower] = (future, seen)
        self._count += 1
        if code not in self._watchers:
            self._watchers[code] = asyncio.create_task(self._watch(code))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return seen
        finally:
            held = self._waiting.get(code, {})
            if held.get(follower, (None,))[0] is future:
                del held[follower]
                self._count -= 1
            if not held:
                self._waiting.pop(code, None)

    async def _prepared(self, code: str, version: int | None) -> None:
        """The class's view of `version` prepared (once, whoever asks; at most prepare_wait_s: it goes on after)."""
        if self._prepare is None or version is None:      # no class (ended): nothing to prepare
            return
        running = self._preparing.get(code)
        if running is None or running[0] != version:
            running = (version, asyncio.create_task(asyncio.to_thread(self._prepare_logged, code)))
            self._preparing[code] = running
            running[1].add_done_callback(lambda task: self._forget_prepared(code, task))
        await asyncio.wait({running[1]}, timeout=self._prepare_wait_s)

    def _forget_prepared(self, code: str, task: asyncio.Task) -> None:
        """A finished preparation is kept while followers of the class wait here (they may ask again for its
        version), else forgotten: the table holds the classes being followed, not every class ever prepared."""
        if self._preparing.get(code, (0, None))[1] is task and not self._waiting.get(code):
            del self._preparing[code]

    def _prepare_logged(self, code: str) -> None:
        try:
            self._prepare(code)
        except Exception:          # the followers' own runs compute the view (and show what went wrong)
            LOG.exception("preparing class %s's view failed", code)

    def _answer_oldest(self, waiters: dict, follower: str | None = None) -> None:
        """Answer a wait at once with its own seen version (no change): follower's, else the oldest of waiters."""
        follower = follower if follower is not None else next(iter(waiters))
        future, seen = waiters.pop(follower)
        self._count -= 1
        if not future.done():
            future.set_result(seen)

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
                changed = [f for f, seen in waiters.values() if seen != version and not f.done()]
                if changed and self._until_teacher_done(code) <= 0:
                    await self._prepared(code, version)
                    for future in changed:
                        if not future.done():
                            future.set_result(version)
        finally:
            self._watchers.pop(code, None)
            if code in self._preparing and self._preparing[code][1].done():
                del self._preparing[code]
