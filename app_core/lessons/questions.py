"""A step's question: multiple choice, a number or a token; its answer fixed in the file or computed on the model and
text in use (so that a teacher's own text still gets right answers), and the check of a student's answer.

Computed answers (`compute = ...` in the question's table):
- "next_token": the token the model ranks first after the text;
- "top_attended": the token that head `head` of layer `layer` attends to most from position `position` (negative
  counts from the end; `without_sink = true` leaves out position 0, the attention sink);
- "n_tokens": how many tokens the model reads in the text;
- "param_count": the calculator's exact count for `preset` (a Parameters preset), or for "model": the model in use.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from app_core.lessons.errors import LessonError, in_each_language
from app_core.link import note
from model.calculator.params import PRESETS, count_parameters, shape_from_config

KINDS = ("choice", "number", "token")
COMPUTED = {"next_token": "token", "top_attended": "token", "n_tokens": "number", "param_count": "number"}
MODEL = "model"                            # param_count's preset for the model in use
DEFAULT_TOLERANCE = 0.01                   # a number is right within 1% (and within 0.5: whole numbers exactly)
_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "万": 1e4, "亿": 1e8}


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

    @property
    def needs_model(self) -> bool:
        """Whether the answer is computed on the model and text in use."""
        return self.compute is not None and not (self.compute == "param_count" and self.preset != MODEL)


@dataclass(frozen=True)
class Answer:
    value: Any                             # the choice's number, a number, or the token's text
    shown: str                             # as the reveal shows it


def _whole(raw: dict, key: str, default: int, where) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LessonError(note("{where}: the question's {key} must be a whole number.", where=where, key=key))
    return value


def parse_question(raw: Any, where) -> Question:
    """A Question from its TOML table, or a LessonError saying what is wrong with it."""
    if not isinstance(raw, dict):
        raise LessonError(note("{where}: the question must be a table.", where=where))
    kind = raw.get("kind")
    if kind not in KINDS:
        raise LessonError(note("{where}: the question's kind must be one of {kinds}, not {kind}.",
                               where=where, kinds=", ".join(KINDS), kind=repr(kind)))
    ask = in_each_language(raw.get("ask"), note("{where}'s question", where=where))
    why = in_each_language(raw.get("why"), note("{where}'s explanation (why)", where=where))
    compute, answer = raw.get("compute"), raw.get("answer")
    if (compute is None) == (answer is None):
        raise LessonError(note("{where}: the question needs either an answer or a compute (not both).", where=where))
    choices: tuple = ()
    if kind == "choice":
        if compute is not None:
            raise LessonError(note("{where}: a multiple-choice answer is fixed in the file (answer = its number).",
                                   where=where))
        options = raw.get("choices")
        if not isinstance(options, list) or len(options) < 2:
            raise LessonError(note("{where}: a multiple-choice question needs at least two choices.", where=where))
        choices = tuple(in_each_language(c, note("{where}'s choice {n}", where=where, n=i))
                        for i, c in enumerate(options, start=1))
        if isinstance(answer, bool) or not isinstance(answer, int) or not 1 <= answer <= len(choices):
            raise LessonError(note("{where}: answer must be the number of the right choice, 1 to {n}.",
                                   where=where, n=len(choices)))
    elif compute is not None:
        if COMPUTED.get(compute) != kind:
            names = ", ".join(name for name, k in COMPUTED.items() if k == kind)
            raise LessonError(note("{where}: a {kind} question can compute {names}, not {compute}.",
                                   where=where, kind=kind, names=names, compute=repr(compute)))
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
                    position=_whole(raw, "position", -1, where), without_sink=bool(raw.get("without_sink", False)),
                    preset=preset, tolerance=float(tolerance))


def _index(i: int, n: int) -> int:
    """A Python-style index (negative from the end) clamped into 0..n-1."""
    return min(max(i + n if i < 0 else i, 0), n - 1)


def _token(lm, token_id: int) -> Answer:
    return Answer(lm.decode([int(token_id)]), lm.token_strings([int(token_id)])[0])


def model_parameters(config) -> int:
    """The calculator's exact parameter count for a loaded model's shape."""
    shape = shape_from_config(config)
    return count_parameters(**{f.name: getattr(shape, f.name) for f in dataclasses.fields(shape)}).total


def computed_answer(question: Question, lm=None, trace=None) -> Answer:
    """The question's answer: fixed, or computed on `lm` (a LanguageModel) and `trace` (its ForwardTrace of the
    text in use); both are needed only when question.needs_model."""
    if question.compute is None:
        if question.kind == "choice":
            return Answer(question.answer, str(question.answer))
        value = question.answer
        return Answer(value, f"{value:,}" if question.kind == "number" else str(value))
    if question.compute == "param_count":
        total = model_parameters(lm.config) if question.preset == MODEL else \
            count_parameters(**PRESETS[question.preset]).total
        return Answer(total, f"{total:,}")
    if question.compute == "n_tokens":
        return Answer(trace.n_tokens_total, f"{trace.n_tokens_total:,}")
    if question.compute == "next_token":
        return _token(lm, int(np.argmax(trace.next_token_logits)))
    attention = trace.attention                                  # [L, H, T, T]
    layer, head = _index(question.layer, attention.shape[0]), _index(question.head, attention.shape[1])
    position = _index(question.position, attention.shape[2])
    row = np.asarray(attention[layer, head, position, : position + 1], dtype=np.float64)    # [position + 1]
    first = 1 if question.without_sink and position > 0 else 0
    return _token(lm, trace.token_ids[first + int(np.argmax(row[first:]))])


def parse_number(text: str) -> float | None:
    """A student's number: '8,190,735,360', '8.19e9', '8.19B', '81.9亿'; None when it is not one."""
    raw = re.sub(r"[\s,_，]", "", text).lower()
    scale = 1.0
    if raw and raw[-1] in _SUFFIXES:
        raw, scale = raw[:-1], _SUFFIXES[raw[-1]]
    try:
        value = float(raw) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def check_answer(question: Question, answer: Answer, given: Any) -> bool:
    """Whether the student's answer (a choice's number, or the typed text) is right."""
    if question.kind == "choice":
        return given == answer.value
    if not isinstance(given, str):
        return False
    if question.kind == "number":
        value = parse_number(given)
        return value is not None and abs(value - answer.value) <= max(question.tolerance * abs(answer.value), 0.5)
    typed = given.strip().casefold()
    return bool(typed) and typed in (answer.value.strip().casefold(), answer.shown.strip().casefold())
