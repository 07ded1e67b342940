"""The order of a class's page runs in one server process: the teacher's first, the followers' one at a time.

Every page run is Python under one GIL. When the teacher changes the view, every follower reruns it: sixty runs at
once each get a sixtieth of the interpreter, all finish together at the end, and the teacher's own next change
(and the event loop sending every page its messages) waits behind all of them. In turns, a follower's run waits
while a teacher's run of its class is going on in this process (and a moment after, GRACE_S, while the teacher's
last messages go out) and then runs alone among followers: the first followers see the change first, the teacher
competes with at most one follower. A wait never lasts longer than WAIT_S: a stuck run cannot stop a class.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager

GRACE_S = 0.05       # after a teacher's run: its last messages go out before the followers' runs start
WAIT_S = 3.0         # the longest a follower's run waits for its turn (then it runs anyway)
FORGET_S = 60.0      # a class whose teacher has not run a page this long is forgotten here


class Turns:
    """Teachers' runs go first, followers' runs one at a time (process-wide; see the module's docstring)."""

    def __init__(self, followers_at_once: int = 1, grace_s: float = GRACE_S, wait_s: float = WAIT_S):
        self._cond = threading.Condition()
        self._teaching: Counter[str] = Counter()         # class code -> teacher runs going on
        self._ended: dict[str, float] = {}               # class code -> when its teacher's last run ended
        self._slots = threading.Semaphore(followers_at_once)
        self._grace_s, self._wait_s = grace_s, wait_s

    @contextmanager
    def teacher(self, code: str):
        """Around a teacher's page run."""
        with self._cond:
            self._teaching[code] += 1
        try:
            yield
        finally:
            with self._cond:
                self._teaching[code] -= 1
                if not self._teaching[code]:
                    del self._teaching[code]
                now = time.monotonic()
                self._ended = {c: t for c, t in self._ended.items() if now - t < FORGET_S}
                self._ended[code] = now
                self._cond.notify_all()

    def until_teacher_done(self, code: str, grace_s: float | None = None) -> float:
        """Seconds until the class's teacher's runs in this process are done, with their grace (the Turns' own
        unless given; 0: now; wait_s while one is going on)."""
        with self._cond:
            return self._teacher_done(code, grace_s)

    def _teacher_done(self, code: str, grace_s: float | None = None) -> float:
        """until_teacher_done, with the cond's lock held."""
        if self._teaching.get(code):
            return self._wait_s
        grace = self._grace_s if grace_s is None else grace_s
        return max(0.0, self._ended.get(code, -grace) + grace - time.monotonic())

    @contextmanager
    def follower(self, code: str):
        """Around a follower's page run: waits for the teacher, then for a follower's turn (at most wait_s)."""
        deadline = time.monotonic() + self._wait_s
        with self._cond:
            while (left := self._teacher_done(code)) > 0 and time.monotonic() < deadline:
                self._cond.wait(min(left, deadline - time.monotonic()))
        got = self._slots.acquire(timeout=max(0.0, deadline - time.monotonic()))
        try:
            yield
        finally:
            if got:
                self._slots.release()
