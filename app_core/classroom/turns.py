"""The order of a class's page runs in one server process: the teacher's first, each class's followers one at a time.

Every page run is Python under one GIL. When the teacher changes the view, every follower reruns it: sixty runs at
once each get a sixtieth of the interpreter, all finish together at the end, and the teacher's own next change
(and the event loop sending every page its messages) waits behind all of them. In turns, a follower's run waits
while a teacher's run of its class is going on in this process (and a moment after, TURN_GRACE_S, while the teacher's
last messages go out) and then runs alone among its class's followers: the first followers see the change first,
the teacher competes with at most one follower of the class. Each class has its own turn: another class's sixty
followers do not delay this one's. A wait never lasts longer than TURN_WAIT_S: a stuck run cannot stop a class.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from app_core.scheduling import TURN_GRACE_S, TURN_WAIT_S

FORGET_S = 60.0      # a class whose teacher has not run a page this long is forgotten here


@dataclass
class _Turn:
    """A class's followers' turn: one run at a time; forgotten when no run holds or wants it."""

    slots: threading.Semaphore
    users: int = 0


@dataclass
class _Ends:
    """When each class's teacher's last run ended here, pruned at most once per FORGET_S."""

    at: dict[str, float] = field(default_factory=dict)
    pruned: float = 0.0


class Turns:
    """Teachers' runs go first, each class's followers' runs one at a time (see the module's docstring)."""

    def __init__(self, followers_at_once: int = 1, grace_s: float = TURN_GRACE_S, wait_s: float = TURN_WAIT_S):
        self._cond = threading.Condition()
        self._teaching: Counter[str] = Counter()         # class code -> teacher runs going on
        self._ended = _Ends()
        self._turns: dict[str, _Turn] = {}               # class code -> its followers' turn
        self._at_once = followers_at_once
        self._grace_s, self._wait_s = grace_s, wait_s

    @property
    def classes(self) -> int:
        """How many classes this process keeps a teacher's end or a followers' turn for."""
        with self._cond:
            return len(self._ended.at.keys() | self._turns.keys())

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
                ends = self._ended
                if now - ends.pruned >= FORGET_S:
                    ends.at = {c: t for c, t in ends.at.items() if now - t < FORGET_S}
                    ends.pruned = now
                ends.at[code] = now
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
        return max(0.0, self._ended.at.get(code, -grace) + grace - time.monotonic())

    @contextmanager
    def follower(self, code: str):
        """Around a follower's page run: waits for the teacher, then for its class's followers' turn (at most
        wait_s)."""
        deadline = time.monotonic() + self._wait_s
        with self._cond:
            while (left := self._teacher_done(code)) > 0 and time.monotonic() < deadline:
                self._cond.wait(min(left, deadline - time.monotonic()))
            turn = self._turns.get(code)
            if turn is None:
                turn = self._turns[code] = _Turn(threading.Semaphore(self._at_once))
            turn.users += 1
        got = turn.slots.acquire(timeout=max(0.0, deadline - time.monotonic()))
        try:
            yield
        finally:
            if got:
                turn.slots.release()
            with self._cond:
                turn.users -= 1
                if not turn.users:
                    del self._turns[code]
