"""The class store of one server process: a dict under a lock (no ATLAS_REDIS_URL)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from app_core.classroom import codes
from app_core.classroom.store import ClassClosed, ClassState, ClassStore, NotTeacher, View, check_answer_text, tally


@dataclass
class _Class:
    secret_hash: str
    view: View
    version: int
    teacher_seen: float
    heartbeats: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)     # follower -> answer to the current question


class MemoryStore(ClassStore):
    """Classes in this process (every session of one server shares them)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._classes: dict[str, _Class] = {}
        self._ended: dict[str, float] = {}        # code -> when (kept ttl_s, so the code reads as ended)

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

    def create(self, view: View) -> tuple[str, str]:
        code, secret = codes.new_code(), codes.new_secret()
        with self._lock:
            self._classes[code] = _Class(codes.secret_hash(secret), view, 1, self.clock())
        return code, secret

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
        with self._lock:
            found = self._teacher(code, secret)
            same_question = view.question == found.view.question
            view = replace(view, revealed=same_question and found.view.revealed)   # the store owns the reveal
            if view != found.view:
                if not same_question:
                    found.answers.clear()
                found.view, found.version = view, found.version + 1
            return found.version

    def reveal(self, code: str, secret: str) -> int:
        with self._lock:
            found = self._teacher(code, secret)
            if not found.view.revealed:
                found.view, found.version = replace(found.view, revealed=True), found.version + 1
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
            found = self._open(code)
            now = self.clock()
            found.heartbeats[follower] = now
            if len(found.heartbeats) > 64:                 # forget the followers long gone
                found.heartbeats = {k: t for k, t in found.heartbeats.items() if now - t <= self.follow_window_s}

    def followers(self, code: str) -> int:
        with self._lock:
            try:
                found = self._open(code)
            except ClassClosed:
                return 0
            now = self.clock()
            return sum(now - t <= self.follow_window_s for t in found.heartbeats.values())

    def answer(self, code: str, follower: str, question: str, answer: str) -> bool:
        check_answer_text(question, follower, answer)
        with self._lock:
            found = self._open(code)
            if question != found.view.question or found.view.revealed:
                return False
            found.answers[follower] = answer
            return True

    def answers(self, code: str, secret: str) -> dict[str, int]:
        with self._lock:
            return tally(list(self._teacher(code, secret).answers.values()))
