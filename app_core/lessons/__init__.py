"""Lessons: ordered steps through the app's views, each a share link's page and settings, a short bilingual text and
an optional question (Streamlit-free). Files: one TOML per lesson (lessons/ at the repository root, and a teacher's
own in ATLAS_LESSONS_DIR); see lessons/README.md for the format."""
from app_core.lessons.answers import Answer, check_answer, check_task, computed_answer
from app_core.lessons.format import LANGS, Lesson, LessonError, Step, parse_lesson
from app_core.lessons.loading import Catalog, load_catalog
from app_core.lessons.questions import Question

__all__ = ["LANGS", "Answer", "Catalog", "Lesson", "LessonError", "Question", "Step", "check_answer", "check_task",
           "computed_answer", "load_catalog", "parse_lesson"]
