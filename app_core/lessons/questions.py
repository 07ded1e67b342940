"""A step's question as the lesson file writes it: its kind, wording and how its answer is known (fixed in the file,
or computed on the model and text in use: app_core/lessons/answers.py), checked when the file is read.

Kinds: "choice" (multiple choice), "number", "token" (a typed token), "point" (the student clicks a token of the
text; the answer is computed: `next_token` or `top_attended`), "task" (the student writes a text and the app runs
the model on it to check a goal: `next_token` with a `target`, `max_tokens` with `n`, `attends` with `layer`,
`head` and a `target`).

Computed answers (`compute = ...`):
- "next_token": the visible token (no space, newline, lone byte or control token) the model ranks first after the
  text;
- "top_attended": the visible token that head `head` of layer `layer` attends to most from position `position`
  (negative counts from the end; `without_sink = true` leaves out position 0, the attention sink);
- "n_tokens": how many tokens the model reads in the text;
- "param_count": the calculator's exact count for `preset` (a Parameters preset), or for "model": the model in use;
- "model_fact": a number of the model's configuration (`fact`: a name of app_core/lessons/facts.py);
- "closed_gates": the share (%) of the MLP's activations at `layer`, `position` that are nearly 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app_core.lessons.errors import LessonError, in_each_language
from app_core.lessons.facts import NAMES as FACT_NAMES
from app_core.link import note
from model.calculator.params import PRESETS

KINDS = ("choice", "number", "token", "point", "task")
COMPUTED = {"next_token": ("token", "point"), "top_attended": ("token", "point"), "n_tokens": ("number",),
            "param_count": ("number",), "model_fact": ("number",), "closed_gates": ("number",)}
GOALS = ("next_token", "max_tokens", "attends")
NUMBER_FACTS = tuple(name for name in FACT_NAMES if name not in ("model_name", "norm", "mlp", "attention_kind",
                                                                 "rope_base"))
MODEL = "model"                            # param_count's preset for the model in use
DEFAULT_TOLERANCE = 0.01                   # a number is right within 1% (and within 0.5: whole numbers exactly)
KEYS = {"kind", "ask", "why", "choices", "answer", "compute", "layer", "head", "position", "without_sink", "preset",
        "tolerance", "fact", "goal", "target", "n", "min_chars", "chinese"}


@dataclass(frozen=True)
class Question:
    kind: str                              # one of KINDS
    ask: dict[str, str]                    # per language
    why: dict[str, str]                    # per language; "{answer}" is replaced by the answer
    choices: tuple[dict[str, str], ...] = ()
    answer: Any = None                     # fixed: the choice's number (from 1), a number or a token's text
    compute: str | None = None             # a key of COMPUTED
    layer: int = 0
    head: int = 0
    position: int = -1
    without_sink: bool = False
    preset: str = MODEL
    tolerance: float = DEFAULT_TOLERANCE
    fact: str | None = None                # model_fact's name
    goal: str | None = None                # a task's goal, one of GOALS
    target: str | None = None              # a task's token (next_token, attends)
    n: int = 0                             # max_tokens: at most this many tokens
    min_chars: int = 1                     # max_tokens: at least this many characters (Chinese ones if chinese)
    chinese: bool = False

    @property
    def needs_model(self) -> bool:
        """Whether the answer is computed on the model and text in use."""
        if self.kind == "task":
            return False
        return self.compute is not None and not (self.compute == "param_count" and self.preset != MODEL)

    @property
    def needs_trace(self) -> bool:
        """Whether the answer needs the model's run on the text in use (not only the model's configuration)."""
        return self.needs_model and self.compute not in ("param_count", "model_fact")


def _whole(raw: dict, key: str, default: int, where, least: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
        raise LessonError(note("{where}: the question's {key} must be a whole number.", where=where, key=key))
    return value


def _flag(raw: dict, key: str, where) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise LessonError(note("{where}: the question's {key} must be true or false.", where=where, key=key))
    return value


def _choices(raw: dict, answer, where) -> tuple:
    options = raw.get("choices")
    if not isinstance(options, list) or len(options) < 2:
        raise LessonError(note("{where}: a multiple-choice question needs at least two choices.", where=where))
    choices = tuple(in_each_language(c, note("{where}'s choice {n}", where=where, n=i))
                    for i, c in enumerate(options, start=1))
    if isinstance(answer, bool) or not isinstance(answer, int) or not 1 <= answer <= len(choices):
        raise LessonError(note("{where}: answer must be the number of the right choice, 1 to {n}.",
                               where=where, n=len(choices)))
    return choices


def _task(raw: dict, where) -> dict:
    """A task's goal and its values."""
    goal = raw.get("goal")
    if goal not in GOALS:
        raise LessonError(note("{where}: a task's goal must be one of {goals}, not {goal}.", where=where,
                               goals=", ".join(GOALS), goal=repr(goal)))
    out: dict[str, Any] = {"goal": goal}
    if goal in ("next_token", "attends"):
        target = raw.get("target")
        if not isinstance(target, str) or not target.strip():
            raise LessonError(note("{where}: a {goal} task needs target = the token's text.", where=where, goal=goal))
        out["target"] = target
    if goal == "max_tokens":
        out["n"] = _whole(raw, "n", 0, where, least=1)
        out["min_chars"] = _whole(raw, "min_chars", 1, where, least=1)
        out["chinese"] = _flag(raw, "chinese", where)
    return out


def _computed(raw: dict, kind: str, compute, where) -> None:
    if kind not in COMPUTED.get(compute, ()):
        names = ", ".join(name for name, kinds in COMPUTED.items() if kind in kinds)
        raise LessonError(note("{where}: a {kind} question can compute {names}, not {compute}.",
                               where=where, kind=kind, names=names or "-", compute=repr(compute)))
    if compute == "model_fact" and raw.get("fact") not in NUMBER_FACTS:
        raise LessonError(note("{where}: model_fact needs fact = one of {names}.", where=where,
                               names=", ".join(NUMBER_FACTS)))


def parse_question(raw: Any, where) -> Question:
    """A Question from its TOML table, or a LessonError saying what is wrong with it."""
    if not isinstance(raw, dict):
        raise LessonError(note("{where}: the question must be a table.", where=where))
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise LessonError(note("{where}: the question has no key {key} (its keys: {known}).", where=where,
                               key=repr(unknown[0]), known=", ".join(sorted(KEYS))))
    kind = raw.get("kind")
    if kind not in KINDS:
        raise LessonError(note("{where}: the question's kind must be one of {kinds}, not {kind}.",
                               where=where, kinds=", ".join(KINDS), kind=repr(kind)))
    ask = in_each_language(raw.get("ask"), note("{where}'s question", where=where))
    why = in_each_language(raw.get("why"), note("{where}'s explanation (why)", where=where))
    compute, answer = raw.get("compute"), raw.get("answer")
    task: dict[str, Any] = {}
    choices: tuple = ()
    misplaced = sorted(set(raw) & {"goal", "target", "n", "min_chars", "chinese"}) if kind != "task" else []
    if misplaced:
        raise LessonError(note("{where}: {key} belongs to a task question (kind = \"task\").", where=where,
                               key=misplaced[0]))
    if kind == "task":
        if compute is not None or answer is not None:
            raise LessonError(note("{where}: a task is checked by its goal: it has no answer or compute.",
                                   where=where))
        task = _task(raw, where)
    elif kind == "point" and compute is None:
        raise LessonError(note("{where}: a point question's answer is computed (compute = next_token or "
                               "top_attended).", where=where))
    elif (compute is None) == (answer is None):
        raise LessonError(note("{where}: the question needs either an answer or a compute (not both).", where=where))
    if kind == "choice":
        if compute is not None:
            raise LessonError(note("{where}: a multiple-choice answer is fixed in the file (answer = its number).",
                                   where=where))
        choices = _choices(raw, answer, where)
    elif compute is not None:
        _computed(raw, kind, compute, where)
    elif kind == "number" and (isinstance(answer, bool) or not isinstance(answer, int | float)):
        raise LessonError(note("{where}: a number question's answer must be a number.", where=where))
    elif kind == "token" and (not isinstance(answer, str) or not answer.strip()):
        raise LessonError(note("{where}: a token question's answer must be the token's text.", where=where))
    preset = raw.get("preset", MODEL)
    if preset != MODEL and preset not in PRESETS:
        raise LessonError(note("{where}: preset {preset} is not one of the calculator's ({names}, or model).",
                               where=where, preset=repr(preset), names=", ".join(PRESETS)))
    tolerance = raw.get("tolerance", DEFAULT_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance < 1:
        raise LessonError(note("{where}: tolerance must be a number from 0 to 1.", where=where))
    return Question(kind=kind, ask=ask, why=why, choices=choices, answer=answer, compute=compute,
                    layer=_whole(raw, "layer", 0, where), head=_whole(raw, "head", 0, where),
                    position=_whole(raw, "position", -1, where), without_sink=_flag(raw, "without_sink", where),
                    preset=preset, tolerance=float(tolerance), fact=raw.get("fact"), **task)
