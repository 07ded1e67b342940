"""The lessons on offer: the built-in files (lessons/ at the repository root) and a teacher's own (ATLAS_LESSONS_DIR),
each *.toml one lesson. A file that cannot be read is listed with its error, never raised: one teacher's typo must
not take the app down (any exception a file makes the reader raise, at any size, is listed as its error). Read
again only when a file changes (names, sizes and times are compared on each call)."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from app_core.lessons.errors import LessonError
from app_core.lessons.format import Lesson, parse_lesson
from app_core.link import Note, note

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "lessons"
ENV_DIR = "ATLAS_LESSONS_DIR"
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class Broken:
    """A lesson file that could not be used, and why."""

    file: str
    error: Note


@dataclass(frozen=True)
class Catalog:
    lessons: tuple[Lesson, ...]
    broken: tuple[Broken, ...]

    def get(self, lesson_id: str | None) -> Lesson | None:
        return next((lesson for lesson in self.lessons if lesson.id == lesson_id), None)


def lesson_dirs() -> list[Path]:
    """The built-in folder, then the teacher's (ATLAS_LESSONS_DIR), if set."""
    extra = os.environ.get(ENV_DIR, "").strip()
    return [BUILTIN_DIR] + ([Path(extra).expanduser()] if extra else [])


def _files(folder: Path) -> tuple[tuple[str, int, int], ...]:
    try:
        found = sorted(p for p in folder.glob("*.toml") if p.is_file())
    except OSError:
        return ()
    out = []
    for path in found:
        try:
            stat = path.stat()
        except OSError:
            continue
        out.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def read_lesson(path: Path) -> Lesson:
    """One file's lesson, or a LessonError (an unreadable file is one too)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise LessonError(note("The file is larger than {n} bytes.", n=f"{MAX_FILE_BYTES:,}"))
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LessonError(note("The file is not UTF-8 text.")) from None
    except OSError as err:
        raise LessonError(note("The file cannot be read: {error}.", error=err.strerror or str(err))) from None
    try:
        return parse_lesson(source, path.stem, origin=path.name)
    except LessonError:
        raise
    except RecursionError:
        raise LessonError(note("The file nests tables or arrays too deeply to be read.")) from None
    except Exception as err:            # noqa: BLE001 - whatever a file makes the reader raise is the file's fault
        raise LessonError(note("The file cannot be read: {error}.", error=_short(f"{type(err).__name__}: {err}"))) \
            from None


def _short(text: str, most: int = 200) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


@functools.lru_cache(maxsize=4)
def _catalog(files: tuple[tuple[str, int, int], ...]) -> Catalog:
    lessons: list[Lesson] = []
    broken: list[Broken] = []
    for name, _, _ in files:
        path = Path(name)
        try:
            lesson = read_lesson(path)
        except LessonError as err:
            broken.append(Broken(path.name, err.note))
            continue
        if any(other.id == lesson.id for other in lessons):
            broken.append(Broken(path.name, note("Another lesson already has the id {id}.", id=lesson.id)))
            continue
        lessons.append(lesson)
    return Catalog(tuple(sorted(lessons, key=lambda lesson: (lesson.order, lesson.id))), tuple(broken))


def load_catalog() -> Catalog:
    """Every lesson file's lesson, or its error (cheap when nothing changed: one stat per file)."""
    return _catalog(tuple(entry for folder in lesson_dirs() for entry in _files(folder)))
