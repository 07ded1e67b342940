"""What a lesson file gets wrong, said in words a teacher can act on; and the check that a text has both languages."""
from __future__ import annotations

from typing import Any

from app_core.link import Note, note

LANGS = ("en", "zh")


class LessonError(ValueError):
    """What is wrong with a lesson file: a Note (its English text, template and values, shown translated)."""

    @property
    def note(self) -> Note:
        return self.args[0]


def in_each_language(value: Any, what) -> dict[str, str]:
    """{'en': ..., 'zh': ...} with both languages as non-empty text, else a LessonError naming what lacks which."""
    if not isinstance(value, dict):
        raise LessonError(note("{what} must be a table with en and zh texts.", what=what))
    for lang in LANGS:
        text = value.get(lang)
        if not isinstance(text, str) or not text.strip():
            raise LessonError(note("{what} has no {lang} text.", what=what, lang=lang))
    return {lang: value[lang].strip() for lang in LANGS}
