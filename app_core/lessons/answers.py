"""A question's answer on the model and text in use, and the check of what a student gave: a choice's number, a typed
number or token, a clicked token (point), or a text the model is run on (task).

A computed token is always a visible one: no whitespace, newline, lone byte of a character or control token (a
class cannot type or see those): next_token is the model's highest-ranked visible token, top_attended the
visible token a head attends to most.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from app_core.lessons.facts import fact_values
from app_core.lessons.questions import MODEL, Question
from app_core.link import Note, note
from model.calculator.params import PRESETS, count_parameters, shape_from_config

_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "万": 1e4, "亿": 1e8}
NEAR_ZERO = 0.05                  # model.analysis.block_walk.NEAR_ZERO: the Inside page's "nearly closed"


@dataclass(frozen=True)
class Answer:
    value: Any                             # the choice's number, a number, or the token's text
    shown: str                             # as the reveal shows it
    positions: tuple[int, ...] = ()        # point: the positions of the text a right click may pick


@dataclass(frozen=True)
class TaskResult:
    """A task checked on a student's text: whether the goal is met, and what the model did (a note to show)."""

    done: bool
    seen: Note


def visible(lm, token_id: int) -> bool:
    """Whether a token can be seen and typed: whole UTF-8 text, not only whitespace, not a control token."""
    if int(token_id) in lm.tokenizer.special_ids:
        return False
    try:
        text = lm.tokenizer.token_bytes(int(token_id)).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return bool(text.strip())


def top_visible(lm, logits: np.ndarray) -> int:
    """The visible token with the highest logit (the top token when none of the first 1,000 is visible)."""
    order = np.argsort(-np.asarray(logits, dtype=np.float64), kind="stable")      # [V]
    return int(next((i for i in order[:1000] if visible(lm, int(i))), order[0]))


def _index(i: int, n: int) -> int:
    """A Python-style index (negative from the end) clamped into 0..n-1."""
    return min(max(i + n if i < 0 else i, 0), n - 1)


def most_attended(lm, trace, layer: int, head: int, position: int, without_sink: bool) -> int:
    """The position of the visible token that head `head` of layer `layer` attends to most from `position`
    (negative: from the end; indices clamped to the model and text); without_sink leaves out position 0."""
    attention = trace.attention                                  # [L, H, T, T]
    layer, head = _index(layer, attention.shape[0]), _index(head, attention.shape[1])
    position = _index(position, attention.shape[2])
    row = np.asarray(attention[layer, head, position, : position + 1], dtype=np.float64)    # [position + 1]
    allowed = np.array([visible(lm, t) for t in trace.token_ids[: position + 1]])
    if without_sink and position > 0:
        allowed[0] = False
    if not allowed.any():
        allowed[:] = True
        allowed[0] = not (without_sink and position > 0)
    return int(np.argmax(np.where(allowed, row, -np.inf)))


def point_row(question: Question, trace) -> np.ndarray:
    """What the model gives each token of the text on a point question ([T]): the head's attention from the
    question's position (top_attended; 0 at the positions it cannot see, and at the sink when without_sink), or the
    probability that the token at each position comes next (next_token)."""
    n = trace.n_tokens
    if question.compute == "next_token":
        logits = np.asarray(trace.next_token_logits, dtype=np.float64)          # [V]
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()                                                   # [V]
        return probs[np.asarray(trace.token_ids[:n], dtype=np.int64)]          # [T]
    attention = trace.attention                                                # [L, H, T, T]
    layer, head = _index(question.layer, attention.shape[0]), _index(question.head, attention.shape[1])
    position = _index(question.position, n)
    row = np.zeros(n)                                                          # [T]
    row[: position + 1] = np.asarray(attention[layer, head, position, : position + 1], dtype=np.float64)
    if question.without_sink and position > 0:
        row[0] = 0.0
    return row


def _token(lm, token_id: int, trace=None) -> Answer:
    """A token's answer; with a trace, the positions of the text that hold the same token."""
    positions = () if trace is None else tuple(i for i, t in enumerate(trace.token_ids[: trace.n_tokens])
                                               if int(t) == int(token_id))
    return Answer(lm.decode([int(token_id)]), lm.token_strings([int(token_id)])[0], positions)


def model_parameters(config) -> int:
    """The calculator's exact parameter count for a loaded model's shape."""
    shape = shape_from_config(config)
    return count_parameters(**{f.name: getattr(shape, f.name) for f in dataclasses.fields(shape)}).total


def _number(value: float) -> Answer:
    shown = f"{int(value):,}" if float(value).is_integer() else f"{value:.3g}"
    return Answer(value, shown)


def task_goal(question: Question) -> Answer:
    """What a task asks for, as its reveal shows it."""
    if question.goal == "max_tokens":
        return Answer(question.n, f"≤ {question.n}")
    return Answer(question.target, question.target.strip())


def computed_answer(question: Question, lm=None, trace=None) -> Answer:
    """The question's answer: fixed, or computed on `lm` (a LanguageModel) and `trace` (its ForwardTrace of the
    text in use); lm is needed when question.needs_model, the trace when question.needs_trace."""
    if question.kind == "task":
        return task_goal(question)
    if question.compute is None:
        if question.kind == "choice":
            return Answer(question.answer, str(question.answer))
        value = question.answer
        return _number(value) if question.kind == "number" else Answer(value, str(value))
    if question.compute == "param_count":
        total = model_parameters(lm.config) if question.preset == MODEL else \
            count_parameters(**PRESETS[question.preset]).total
        return Answer(total, f"{total:,}")
    if question.compute == "model_fact":
        return _number(fact_values(lm.config)[question.fact])
    if question.compute == "n_tokens":
        return Answer(trace.n_tokens_total, f"{trace.n_tokens_total:,}")
    if question.compute == "closed_gates":
        share = 100 * lm.block_walk(trace, _index(question.layer, lm.config.n_layers),
                                    _index(question.position, trace.n_tokens)).near_zero_share(NEAR_ZERO)
        return Answer(share, f"{share:.0f}%")
    if question.compute == "next_token":
        return _token(lm, top_visible(lm, trace.next_token_logits), trace)
    at = most_attended(lm, trace, question.layer, question.head, question.position, question.without_sink)
    found = _token(lm, trace.token_ids[at])
    return dataclasses.replace(found, shown=f"#{at} {found.shown}", positions=(at,)) if question.kind == "point" \
        else found


def parse_number(text: str) -> float | None:
    """A student's number: '8,190,735,360', '8.19e9', '8.19B', '81.9亿', '14%'; None when it is not one."""
    raw = re.sub(r"[\s,_，%]", "", text).lower()
    scale = 1.0
    if raw and raw[-1] in _SUFFIXES:
        raw, scale = raw[:-1], _SUFFIXES[raw[-1]]
    try:
        value = float(raw) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def same_token(typed: str, answer: Answer) -> bool:
    """Whether a typed token is the answer's (spaces around it and case ignored)."""
    typed = typed.strip().casefold()
    return bool(typed) and typed in (str(answer.value).strip().casefold(), answer.shown.strip().casefold())


def check_answer(question: Question, answer: Answer, given: Any, lm=None) -> bool:
    """Whether the student's answer is right: a choice's number, the typed text, a clicked position (point; a typed
    token is taken too), or for a task the student's text, which needs the model `lm`."""
    if question.kind == "choice":
        return given == answer.value
    if question.kind == "point" and isinstance(given, int) and not isinstance(given, bool):
        return given in answer.positions
    if not isinstance(given, str):
        return False
    if question.kind == "task":
        return lm is not None and check_task(question, lm, given).done
    if question.kind == "number":
        value = parse_number(given)
        return value is not None and abs(value - answer.value) <= max(question.tolerance * abs(answer.value), 0.5)
    if question.kind == "point":
        return same_token(given, Answer(answer.value, answer.shown.split(" ", 1)[-1]))
    return same_token(given, answer)


def chinese_chars(text: str) -> int:
    """How many Chinese characters (CJK unified ideographs) text has."""
    return sum("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" for ch in text)


def check_task(question: Question, lm, text: str, run=None) -> TaskResult:
    """A task's goal checked by running the model on the student's text (run: text -> its ForwardTrace, e.g. a
    cache's; lm.run by default)."""
    text = text.strip()
    ids = lm.encode(text) if text else []
    n_text = len(ids) - len(lm.tokenizer.prefix_ids)
    if question.goal == "max_tokens":
        chars = chinese_chars(text) if question.chinese else len("".join(text.split()))
        done = chars >= question.min_chars and n_text <= question.n
        return TaskResult(done, note("{chars} characters, {n} tokens.", chars=chars, n=n_text))
    if n_text < 1:
        return TaskResult(False, note("The text is empty."))
    trace = (run or lm.run)(text)
    if question.goal == "next_token":
        got = _token(lm, top_visible(lm, trace.next_token_logits))
        return TaskResult(same_token(question.target, got),
                          note("The model's first choice after your text: {token}.", token=got.shown))
    at = most_attended(lm, trace, question.layer, question.head, -1, question.without_sink)
    got = _token(lm, trace.token_ids[at])
    return TaskResult(same_token(question.target, got),
                      note("From the last token, layer {layer}, head {head} looks most at {token}.",
                           layer=question.layer, head=question.head, token=f"#{at} {got.shown}"))
