"""The class store of one server process: dicts under a lock (no ATLAS_REDIS_URL).

Every call is O(1) in the number of followers (a heartbeat moves its id to the end of an insertion-ordered dict, so
the oldest come first), except sweep(), which a timer calls off the event loop, and the teacher's reads: the count
of followers (once a second, from the newest back to the first stale one) and the answers' tallies (counted from
one question's answers, or every question's).
"""
from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field, replace

from app_core.classroom import codes
from app_core.classroom.store import (
    MAX_FOLLOWERS,
    MAX_QUESTIONS,
    TICKET_S,
    ClassClosed,
    ClassesFull,
    ClassState,
    ClassStore,
    NotTeacher,
    View,
    check_answer_text,
    check_view,
    tally,
)

MAX_TICKETS = 4096             # tickets waiting to be swapped (each lives TICKET_S; the oldest go first)


@dataclass
class _Class:
    secret_hash: str
    view: View
    version: int
    teacher_seen: float
    heartbeats: dict[str, float] = field(default_factory=dict)   # follower -> last heartbeat, oldest first
    answers: dict[str, dict[str, str]] = field(default_factory=dict)   # question -> follower -> answer
    revealed: set[str] = field(default_factory=set)              # questions whose answer was revealed


class MemoryStore(ClassStore):
    """Classes in this process (every session of one server shares them)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._classes: dict[str, _Class] = {}
        self._ended: dict[str, float] = {}        # code -> when (kept ttl_s, so the code reads as ended)
        self._tickets: dict[str, tuple[str, float]] = {}   # ticket id -> (sealed token, expiry)
        self._key = secrets.token_bytes(32)

    def _open(self, code: str) -> _Class:
        """The open class (lock held); ClassClosed, dropping it when its teacher has been away ttl_s."""
        found = self._classes.get(code)
        if found is not None and self.clock() - found.teacher_seen > self.ttl_s:
            del self._classes[code]
            found = None
        if found is None:
            ended = self._ended.get(code)
            raise ClassClosed(code, ended is not None and self.clock() - ended <= self.ttl_s)
        return found

    def _teacher(self, code: str, secret: str) -> _Class:
        found = self._open(code)
        if not codes.secret_matches(secret, found.secret_hash):
            raise NotTeacher(code)
        found.teacher_seen = self.clock()
        return found

    def _make_room(self, now: float) -> None:
        """Room for one more class (lock held): expired classes go, then the one idle longest if idle_s; else
        ClassesFull."""
        if len(self._classes) < self.max_classes:
            return
        self._sweep_classes(now)
        if len(self._classes) < self.max_classes:
            return
        code, idle = min(self._classes.items(), key=lambda item: item[1].teacher_seen)
        if now - idle.teacher_seen < self.idle_s:
            raise ClassesFull(f"{len(self._classes)} classes are open (at most {self.max_classes})")
        del self._classes[code]
        self._ended[code] = now

    def create(self, view: View) -> tuple[str, str]:
        check_view(view)
        code, secret = codes.new_code(), codes.new_secret()
        with self._lock:
            now = self.clock()
            self._make_room(now)
            self._classes[code] = _Class(codes.secret_hash(secret), view, 1, now)
        return code, secret

    def open_classes(self) -> int:
        with self._lock:
            return len(self._classes)

    def version(self, code: str) -> int | None:
        with self._lock:
            try:
                return self._open(code).version
            except ClassClosed:
                return None

    def state(self, code: str) -> ClassState:
        with self._lock:
            found = self._open(code)
            return ClassState(code, found.version, found.view)

    def publish(self, code: str, secret: str, view: View) -> int:
        check_view(view)
        with self._lock:
            found = self._teacher(code, secret)
            revealed = found.view.revealed if view.question == found.view.question else \
                view.question in found.revealed                 # the store owns the reveal
            view = replace(view, revealed=revealed)
            if view != found.view:
                found.view, found.version = view, found.version + 1
            return found.version

    def reveal(self, code: str, secret: str) -> int:
        with self._lock:
            found = self._teacher(code, secret)
            if not found.view.revealed:
                found.view, found.version = replace(found.view, revealed=True), found.version + 1
                if found.view.question is not None:
                    found.revealed.add(found.view.question)
            return found.version

    def teacher_here(self, code: str, secret: str) -> None:
        with self._lock:
            self._teacher(code, secret)

    def end(self, code: str, secret: str) -> None:
        with self._lock:
            self._teacher(code, secret)
            del self._classes[code]
            self._ended[code] = self.clock()

    def follow(self, code: str, follower: str) -> None:
        check_answer_text("", follower, "-")
        with self._lock:
            beats = self._open(code).heartbeats
            beats.pop(follower, None)                    # to the end: the dict stays oldest first
            beats[follower] = self.clock()
            if len(beats) > MAX_FOLLOWERS:
                del beats[next(iter(beats))]

    def followers(self, code: str) -> int:
        with self._lock:
            try:
                found = self._open(code)
            except ClassClosed:
                return 0
            oldest = self.clock() - self.follow_window_s
            n = 0
            for beat in reversed(found.heartbeats.values()):
                if beat < oldest:
                    break
                n += 1
            return n

    def answer(self, code: str, follower: str, question: str, answer: str) -> bool:
        check_answer_text(question, follower, answer)
        with self._lock:
            found = self._open(code)
            if question != found.view.question or found.view.revealed:
                return False
            given = found.answers.get(question, {})
            if not given and len(found.answers) >= MAX_QUESTIONS:
                return False
            if follower not in given and len(given) >= MAX_FOLLOWERS:
                return False
            found.answers[question] = given
            given[follower] = answer
            return True

    def answers(self, code: str, secret: str) -> dict[str, int]:
        with self._lock:
            found = self._teacher(code, secret)
            return tally(list(found.answers.get(found.view.question, {}).values()))

    def tallies(self, code: str, secret: str) -> dict[str, dict[str, int]]:
        with self._lock:
            return {question: tally(list(given.values()))
                    for question, given in self._teacher(code, secret).answers.items()}

    # ------------------------------------------------------------------------------------ upkeep, keys, tickets
    def _sweep_classes(self, now: float) -> int:
        expired = [code for code, found in self._classes.items() if now - found.teacher_seen > self.ttl_s]
        for code in expired:
            del self._classes[code]
        return len(expired)

    def sweep(self) -> int:
        with self._lock:
            now = self.clock()
            gone = self._sweep_classes(now)
            for ended in [code for code, when in self._ended.items() if now - when > self.ttl_s]:
                del self._ended[ended]
                gone += 1
            oldest = now - self.follow_window_s
            for found in self._classes.values():
                beats = found.heartbeats
                while beats and next(iter(beats.values())) < oldest:
                    del beats[next(iter(beats))]
                    gone += 1
            for spent in [name for name, (_, expiry) in self._tickets.items() if expiry < now]:
                del self._tickets[spent]
                gone += 1
            return gone

    def shared_key(self) -> bytes:
        return self._key

    def issue_ticket(self, token: str) -> str:
        ticket = codes.new_ticket()
        sealed = codes.seal(token, ticket)
        with self._lock:
            self._tickets[codes.ticket_id(ticket)] = (sealed, self.clock() + TICKET_S)
            if len(self._tickets) > MAX_TICKETS:
                del self._tickets[next(iter(self._tickets))]
        return ticket

    def redeem_ticket(self, ticket: str) -> str | None:
        if not codes.is_secret(ticket):
            return None
        with self._lock:
            found = self._tickets.pop(codes.ticket_id(ticket), None)
        if found is None or found[1] < self.clock():
            return None
        return codes.unseal(found[0], ticket)
