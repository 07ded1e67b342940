"""A class's answers to a lesson as an anonymous CSV: for each step with a question, in order, how many students sent
each answer, whether it is right, and the share of the step's answers that are right. No names, no order of sending.

What a student's session sends for a step (one value per student, the last one counts), by the question's kind:
- choice: the choice's number ("2");
- number, token, task: "right" or "wrong" (checked in the student's session, on the model: a task runs it);
- point: the clicked position ("5"), right when it is one of the step's right positions (`points`), shown with its
  token when the step's tokens are given.
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app_core.lessons.format import Lesson

RIGHT, WRONG = "right", "wrong"
HEADER = ("step", "kind", "question", "answer", "right", "count", "step_answers", "step_share_right")


@dataclass(frozen=True)
class PointKey:
    """A point question's key on the class's text: its tokens, and the positions a right click may pick."""

    tokens: Sequence[str]
    right: frozenset[int]


def _judge(question, sent: str, lang: str, point: PointKey | None) -> tuple[str, bool]:
    """(the answer as the CSV shows it, whether it is right) for one sent value."""
    if question.kind == "choice":
        n = int(sent) if sent.isdigit() else 0
        label = question.choices[n - 1][lang] if 1 <= n <= len(question.choices) else sent
        return label, n == question.answer
    if question.kind == "point" and sent.isdigit():
        at = int(sent)
        label = f"#{at} {point.tokens[at]}" if point is not None and at < len(point.tokens) else f"#{at}"
        return label, point is not None and at in point.right
    return sent, sent == RIGHT


def _counts(values: Sequence[str] | Mapping[str, int]) -> Counter:
    """What a step's students sent, counted: a list of the values, or a class store's tally {value: count}."""
    if isinstance(values, Mapping):
        return Counter({str(value): int(count) for value, count in values.items()})
    return Counter(str(value) for value in values)


def class_results_csv(lesson: Lesson, lang: str, sent: Mapping[int, Sequence[str] | Mapping[str, int]],
                      points: Mapping[int, PointKey] | None = None) -> str:
    """The CSV of a class's answers: sent maps a step's number (from 1) to what its students sent (the values, or a
    tally {value: count} as the class store keeps it); points gives each point question's key. Steps with a question
    come in the lesson's order (also those nobody answered, with a row of count 0); within a step, answers by count,
    then as the question lists them."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for n, step in enumerate(lesson.steps, start=1):
        question = step.question
        if question is None:
            continue
        judged: Counter = Counter()
        for value, count in _counts(sent.get(n, ())).items():
            judged[_judge(question, value, lang, (points or {}).get(n))] += count
        total = sum(judged.values())
        share = f"{sum(c for (_, right), c in judged.items() if right) / total:.3f}" if total else ""
        if question.kind == "choice":                 # every choice, also those nobody picked, in the file's order
            listed = [(c[lang], i == question.answer) for i, c in enumerate(question.choices, start=1)]
            listed += [key for key in judged if key not in listed]
        else:
            listed = sorted(judged, key=lambda key: key[0])
        rows = sorted(((key, judged.get(key, 0)) for key in listed), key=lambda item: -item[1])
        if not rows:
            rows = [(("", False), 0)]
        for (label, right), count in rows:
            writer.writerow((n, question.kind, question.ask[lang], label, "yes" if right else "no", count, total,
                             share))
    return out.getvalue()
