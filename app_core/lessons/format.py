"""A lesson file (TOML, both languages in one file) -> a Lesson, or a LessonError that says what is wrong.

A step's view is exactly what a share link carries: a page name and its settings, read by the link codec
(app_core/link.decode with the page's schema), so an unknown page or setting, or a value no link could hold, is
refused by the same code that reads links. Bounds that follow the model (layer, head) are checked when the step is
opened on a model (clamped there with the link's notes), not here.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

from app_core import schemas as S
from app_core.lessons.errors import LANGS, LessonError, in_each_language
from app_core.lessons.questions import Question, parse_question
from app_core.link import Context, decode, note

__all__ = ["LANGS", "Lesson", "LessonError", "Step", "parse_lesson"]

CLASS_SETTINGS = (S.PRESENT.name, S.LANG.name, S.MODEL.name)   # the class's own choices: a step never sets them
MAX_STEPS = 40
# Bounds as wide as any model's: at load time only values that no model could take are refused.
ANY_MODEL = Context(n_layers=10**6, n_heads=10**6, head_dim=2 * 10**6, vocab_size=10**9, n_tokens=None)


@dataclass(frozen=True)
class Step:
    """One step: the page, its settings as a link's query params (strings), the text per language, a question."""

    page: str
    settings: dict[str, str]
    text: dict[str, str]
    question: Question | None = None
    predict: bool = False        # the view stays hidden until the student has answered the question or revealed it

    def query(self) -> dict[str, str]:
        """The step's view as a share link's query params."""
        return dict(self.settings)


@dataclass(frozen=True)
class Lesson:
    id: str
    title: dict[str, str]
    summary: dict[str, str]
    steps: tuple[Step, ...]
    order: int = 1000
    source: str = field(default="", compare=False)     # the file it came from

    def step(self, n: int) -> Step:
        """Step n, counted from 1."""
        return self.steps[n - 1]


def setting_text(value: Any) -> str:
    """A setting written in TOML (number, true/false, text, list of numbers) as a link's query-param string."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(setting_text(v) for v in value)
    return str(value)


def parse_view(page: Any, settings: Any, where: str) -> tuple[str, dict[str, str]]:
    """The step's page and settings, checked by the link codec against the page's schema."""
    pages = [name for name in S.SCHEMAS if name != S.LESSONS.page]
    if not isinstance(page, str) or page not in pages:
        raise LessonError(note("{where}: {page} is not a page of this app (pages: {pages}).",
                               where=where, page=repr(page), pages=", ".join(pages)))
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise LessonError(note("{where}: settings must be a table of setting = value.", where=where))
    schema = S.schema(page)
    for name in settings:
        if schema.by_name(name) is None or name in CLASS_SETTINGS:
            known = ", ".join(p.name for p in schema.params if p.name not in CLASS_SETTINGS)
            raise LessonError(note("{where}: the {page} page has no setting {name} (its settings: {known}).",
                                   where=where, page=page, name=repr(name), known=known))
    query = {name: setting_text(value) for name, value in settings.items()}
    _, notes = decode(query, schema, ANY_MODEL)
    if notes:
        raise LessonError(note("{where}: {problem}", where=where, problem=notes[0]))
    return page, query


def parse_step(raw: Any, n: int) -> Step:
    where = note("step {n}", n=n)
    if not isinstance(raw, dict):
        raise LessonError(note("{where} is not a table.", where=where))
    unknown = set(raw) - {"page", "settings", "text", "question", "predict"}
    if unknown:
        raise LessonError(note("{where}: unknown key {key} (a step has page, settings, text, question, predict).",
                               where=where, key=repr(sorted(unknown)[0])))
    page, query = parse_view(raw.get("page"), raw.get("settings"), where)
    text = in_each_language(raw.get("text"), note("{where}'s text", where=where))
    question = parse_question(raw["question"], where) if "question" in raw else None
    predict = raw.get("predict", False)
    if not isinstance(predict, bool):
        raise LessonError(note("{where}: predict must be true or false.", where=where))
    if predict and question is None:
        raise LessonError(note("{where}: predict = true hides the view until the question is answered: the step "
                               "needs a question.", where=where))
    return Step(page=page, settings=query, text=text, question=question, predict=predict)


def parse_lesson(source: str, lesson_id: str, origin: str = "") -> Lesson:
    """A lesson from the text of its TOML file (lesson_id: the file's name without .toml, unless it sets id)."""
    try:
        raw = tomllib.loads(source)
    except tomllib.TOMLDecodeError as err:
        raise LessonError(note("Bad TOML syntax: {error}.", error=str(err))) from None
    lesson_id = raw.get("id", lesson_id)
    if not isinstance(lesson_id, str) or not lesson_id or not all(c.isalnum() or c in "-_" for c in lesson_id):
        raise LessonError(note("The lesson's id {id} must be letters, digits, - and _.", id=repr(lesson_id)))
    order = raw.get("order", 1000)
    if isinstance(order, bool) or not isinstance(order, int):
        raise LessonError(note("order must be a whole number."))
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise LessonError(note("The lesson has no steps (each starts with [[steps]])."))
    if len(steps) > MAX_STEPS:
        raise LessonError(note("The lesson has {n} steps: at most {most}.", n=len(steps), most=MAX_STEPS))
    return Lesson(id=lesson_id, title=in_each_language(raw.get("title"), "title"),
                  summary=in_each_language(raw.get("summary"), "summary"),
                  steps=tuple(parse_step(step, i) for i, step in enumerate(steps, start=1)), order=order,
                  source=origin)
