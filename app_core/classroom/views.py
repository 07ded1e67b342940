"""Between the app's links and a class: the view the teacher publishes, its question (a lesson step's) and text, what
a follower resets before opening it, the join link and its QR code. Streamlit-free (app_pages/classroom calls
these)."""
from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import segno

from app_core import schemas as S
from app_core.classroom.store import View
from app_core.lessons import load_catalog

JOIN = "join"                  # a student's link parameter: the class's code
TEACH = "teach"                # the teacher's own address only: code.secret
PERSONAL = (S.PRESENT.name, S.LANG.name)            # each screen's own: never published, never followed
QR_SCALE = 12                  # px per module (the page shows it ~330 px wide: ~9 px a module on the screen)
QR_BORDER = 2                  # modules of quiet zone (the panel around it is white too)


def question_key(lesson_id: str, n: int) -> str:
    """The key of a lesson step's question in the class."""
    return f"{lesson_id}/{n}"


def read_question_key(key: str | None) -> tuple[str, int] | None:
    """(lesson id, step n) of a question key; None for none or a malformed one."""
    lesson_id, slash, n = (key or "").rpartition("/")
    return (lesson_id, int(n)) if slash and lesson_id and n.isdigit() else None


def step_question(key: str | None):
    """(lesson, n, question) of a question key, if its lesson reads and the step has a question."""
    step = read_question_key(key)
    lesson = load_catalog().get(step[0]) if step else None
    if lesson is None or not 1 <= step[1] <= len(lesson.steps):
        return None
    question = lesson.step(step[1]).question
    return (lesson, step[1], question) if question is not None else None


def class_text(view: View) -> str:
    """The text of the class's view (what its followers' pages read; the default text when the view names none)."""
    return view.params.get(S.TEXT.name) or S.TEXT.default


def teacher_view(page: str, link: Mapping[str, str], state: Mapping[str, Any], question: str | None,
                 predict: bool = False) -> View:
    """What the followers show: the page and its link's params without the personal ones, with the text even when
    it is too long for a link (the store carries it); the step's question key, and whether the step holds its chart
    until the question is answered (predict)."""
    params = {k: v for k, v in link.items() if k not in PERSONAL}
    text = state.get(S.TEXT.key)
    applies = any(p.key == S.TEXT.key for p in S.schema(page).active(state))
    if applies and S.TEXT.name not in params and isinstance(text, str) and text != S.TEXT.default:
        params[S.TEXT.name] = text
    return View(page, params, question, predict=predict and question is not None)


def keys_to_reset(page: str) -> list[str]:
    """The state keys a follower drops before opening the teacher's view of page (the link then sets those that
    differ from their defaults); the personal ones stay."""
    return [p.key for p in S.schema(page).params if p.name not in PERSONAL]


def join_link(app_url: str | None, code: str) -> str:
    """The join link: the app's address (scheme and host of app_url) with ?join=<code>."""
    parts = urlsplit(app_url or "")
    origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
    return f"{origin}/?{urlencode({JOIN: code})}"


def qr_png(link: str) -> bytes:
    """The link as a QR code (PNG, black on white)."""
    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="png", scale=QR_SCALE, border=QR_BORDER)
    return out.getvalue()
