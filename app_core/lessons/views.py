"""A step's view in the state and in the link: the settings it gives its page, the query params of a lesson's link
(?lesson=<id>&step=<n> beside the page's own settings), and the snippet "Copy as a lesson step" hands a teacher."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

from app_core import schemas as S
from app_core.lessons.format import CLASS_SETTINGS, Lesson, Step
from app_core.link import Context, Note, decode


def step_settings(step: Step, ctx: Context) -> tuple[dict, list[str], list[Note]]:
    """({state key: value} the step sets, [state keys it leaves at their defaults], notes on values this model
    clamps). The text is the class's unless the step gives one; presenter mode, language and model stay as they
    are."""
    schema = S.schema(step.page)
    values, notes = decode(step.query(), schema, ctx)
    kept = {S.TEXT.key} | {p.key for p in schema.params if p.name in CLASS_SETTINGS}
    reset = [p.key for p in schema.params if p.key not in values and p.key not in kept]
    return values, reset, notes


def lesson_params(lesson_id: str, n: int) -> dict[str, str]:
    return {S.LESSON.name: lesson_id, S.LESSON_STEP.name: str(n)}


def read_lesson_link(query: Mapping[str, str]) -> tuple[str | None, int]:
    """(lesson id, step from 1) from a link's query params; (None, 1) when the link names no lesson. A malformed
    step is step 1."""
    raw = query.get(S.LESSON.name)
    if not raw or not raw.strip():
        return None, 1
    try:
        n = S.LESSON_STEP.parse(query.get(S.LESSON_STEP.name) or "1")
    except ValueError:
        n = 1
    return raw.strip(), n


def clamp_step(lesson: Lesson, n: int) -> int:
    return min(max(1, n), len(lesson.steps))


def _toml_value(raw: str) -> str:
    if re.fullmatch(r"-?\d{1,15}", raw):
        return raw
    return json.dumps(raw, ensure_ascii=False)       # a JSON string is a valid TOML basic string


def step_snippet(page: str, query: Mapping[str, str]) -> str:
    """A [[steps]] entry of a lesson file for this view (its page and the link's settings), text to fill in."""
    settings = ", ".join(f"{name} = {_toml_value(value)}" for name, value in query.items()
                         if name not in CLASS_SETTINGS)
    return "\n".join([
        "[[steps]]",
        f'page = "{page}"',
        f"settings = {{ {settings} }}" if settings else "settings = {}",
        'text.en = """What to look at here."""',
        'text.zh = """这里看什么。"""',
    ]) + "\n"
