"""A class's shared state and the interface of its two stores (memory.py: this process; redis_store.py: Redis,
shared by every replica).

The state is the teacher's current view (exactly what a share link carries: the page and its query params, the
text always), its version (one number a follower polls cheaply, raised by every change of the view and by Reveal),
the current question's key, whether the step holds its chart until the answer (predict) and whether its answer is
revealed; beside it, the followers' heartbeats and the students' answers. Every change of the view needs the
teacher's secret; a student writes only their own heartbeat and their own answer to the current question.

Answers are kept per question until the class ends: one per student and question (the last one counts), so a
teacher who goes back to a step finds its answers, and a revealed question stays revealed (it takes no more
answers). The teacher reads the current question's tally (the live strip) and every question's (the class's
results). A class ends with end() or after `ttl_s` (12 h) without the teacher.

Bounded whatever visitors do: at most `max_classes` open at once (a new class takes the place of one whose teacher
has been away `idle_s`, else ClassesFull), a view of at most VIEW_CHARS, MAX_FOLLOWERS heartbeats a class and
answers a question, answers to at most MAX_QUESTIONS questions a class; sweep() (a timer calls it) forgets expired
and ended classes, old heartbeats and spent tickets. A ticket hands the teacher's key to their browser once
(server/class_key.py), within TICKET_S.
"""
from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

TTL_S = 12 * 3600              # a class ends after this long without the teacher
FOLLOW_WINDOW_S = 15.0         # a follower counts while its last heartbeat is this recent
ANSWER_CHARS = 16              # an answer is a choice's number, a clicked position or "right" / "wrong": short
QUESTION_CHARS = 300           # a question's key: lesson id / step
MAX_QUESTIONS = 64             # questions a class keeps answers to (a lesson has at most 40 steps)
SEP = "\x1f"                   # between a question's key and a follower or an answer, in a store's field names
FOLLOWER_ID_CHARS = 64
MAX_CLASSES = 200              # open classes at once, per server (per deployment with Redis): ATLAS_MAX_CLASSES
IDLE_S = 600.0                 # when full, a class whose teacher has been away this long gives its place to a new one
VIEW_CHARS = 32_000            # a published view's JSON (the page's own limits keep it under ~20,000)
MAX_FOLLOWERS = 2048           # heartbeats and answers kept per class (the oldest heartbeat goes first)
TICKET_S = 60.0                # a ticket swaps for the teacher's cookie once, within this long


class ClassClosed(LookupError):
    """No open class has this code: `ended` says whether its teacher ended it (else unknown, or expired)."""

    def __init__(self, code: str, ended: bool):
        super().__init__(f"class {code} {'has ended' if ended else 'is unknown'}")
        self.code, self.ended = code, ended


class StoreUnavailable(ConnectionError):
    """The store cannot be reached (Redis down or unreachable; `slow`: it did not answer in time): nothing was read
    or written. `retry_in_s`: how soon a call may reach it again (calls fail at once until then)."""

    def __init__(self, why: str = "", slow: bool = False, retry_in_s: float = 0.0):
        super().__init__(why)
        self.slow, self.retry_in_s = slow, retry_in_s


class NotTeacher(PermissionError):
    """The secret given is not the teacher's: nothing was written."""


class ClassesFull(RuntimeError):
    """As many classes are open as the server holds (and none was left idle): no class was started."""


@dataclass(frozen=True)
class View:
    """What every follower shows: a page, its link's query params, the step's question (key), whether the step
    holds its chart until the question is answered (predict) and the question's reveal."""

    page: str
    params: dict[str, str] = field(default_factory=dict)
    question: str | None = None
    revealed: bool = False
    predict: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> View:
        data = json.loads(text)
        return View(str(data["page"]), {str(k): str(v) for k, v in data["params"].items()},
                    data.get("question"), bool(data.get("revealed")), bool(data.get("predict")))


@dataclass(frozen=True)
class ClassState:
    code: str
    version: int
    view: View


def tally(answers: list[str]) -> dict[str, int]:
    """How many gave each answer."""
    return dict(Counter(answers))


def check_view(view: View) -> str:
    """The view's JSON; ValueError when it is longer than VIEW_CHARS."""
    text = view.to_json()
    if len(text) > VIEW_CHARS:
        raise ValueError(f"a class view of {len(text)} characters (at most {VIEW_CHARS})")
    return text


def check_answer_text(question: str, follower: str, answer: str) -> None:
    """ValueError for an answer a student could not have sent from the page (too long, empty, a separator)."""
    if not answer or len(answer) > ANSWER_CHARS or not follower or len(follower) > FOLLOWER_ID_CHARS or \
            len(question) > QUESTION_CHARS or SEP in question + follower + answer:
        raise ValueError("not an answer")


class ClassStore(ABC):
    """Open, follow, drive and end classes. `clock` gives the time in seconds (heartbeats, expiry in memory)."""

    networked = False          # its calls wait on the network (an event loop calls them in a thread)

    def __init__(self, ttl_s: float = TTL_S, follow_window_s: float = FOLLOW_WINDOW_S,
                 clock: Callable[[], float] = time.time, max_classes: int = MAX_CLASSES, idle_s: float = IDLE_S):
        self.ttl_s, self.follow_window_s, self.clock = ttl_s, follow_window_s, clock
        self.max_classes, self.idle_s = max_classes, idle_s

    @abstractmethod
    def create(self, view: View) -> tuple[str, str]:
        """A new class showing view: (its join code, the teacher's secret). ClassesFull, ValueError (view too long)."""

    @abstractmethod
    def open_classes(self) -> int:
        """How many classes are open."""

    @abstractmethod
    def sweep(self) -> int:
        """Forget expired and ended classes, stale heartbeats and spent tickets: how many entries went."""

    @abstractmethod
    def shared_key(self) -> bytes:
        """A random key shared by every process on this store (followers.py signs follower ids with it)."""

    @abstractmethod
    def issue_ticket(self, token: str) -> str:
        """A one-time ticket for the teacher's token (code.secret), valid TICKET_S."""

    @abstractmethod
    def redeem_ticket(self, ticket: str) -> str | None:
        """The token of a ticket, once; None when it is unknown, spent or expired."""

    @abstractmethod
    def version(self, code: str) -> int | None:
        """The view's version (a follower's poll: one read); None when no open class has this code."""

    @abstractmethod
    def state(self, code: str) -> ClassState:
        """The class's version and view; ClassClosed when no open class has this code."""

    @abstractmethod
    def publish(self, code: str, secret: str, view: View) -> int:
        """The teacher's new view: the new version. The same view again changes nothing (same version); another
        question is revealed only if it was before (view.revealed is ignored: reveal() sets it), and keeps the
        answers it had. NotTeacher, ClassClosed, ValueError (view too long)."""

    @abstractmethod
    def reveal(self, code: str, secret: str) -> int:
        """Reveal the current question's answer on every screen (for good: it takes no more answers): the new
        version. NotTeacher, ClassClosed."""

    @abstractmethod
    def teacher_here(self, code: str, secret: str) -> None:
        """The teacher is still there: the class lives another ttl_s. NotTeacher, ClassClosed."""

    @abstractmethod
    def end(self, code: str, secret: str) -> None:
        """End the class: its code then reads as ended. NotTeacher, ClassClosed."""

    @abstractmethod
    def follow(self, code: str, follower: str) -> None:
        """A follower's heartbeat. ClassClosed."""

    @abstractmethod
    def followers(self, code: str) -> int:
        """How many followers sent a heartbeat within follow_window_s."""

    @abstractmethod
    def answer(self, code: str, follower: str, question: str, answer: str) -> bool:
        """A student's answer to the current question (the last one counts); False when that question is no longer
        the current one, its answer is revealed, MAX_FOLLOWERS others answered it, or it would be the class's
        MAX_QUESTIONS + 1st question answered. ClassClosed, ValueError (not an answer the page sends)."""

    @abstractmethod
    def answers(self, code: str, secret: str) -> dict[str, int]:
        """The current question's answers, counted (only the teacher reads them). NotTeacher, ClassClosed."""

    @abstractmethod
    def tallies(self, code: str, secret: str) -> dict[str, dict[str, int]]:
        """Every question's answers, counted: {question key: {answer: count}} (only the teacher reads them).
        NotTeacher, ClassClosed."""
