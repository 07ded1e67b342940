"""Every computed question of the built-in lessons, on the built-in model and on each architecture's tiny model: a
token answer is one a class can see and type (no whitespace, newline, lone byte of a character or control token);
point questions have a place to click; tasks are checked by running the model, and can be done on the built-in
model (a sample text does it, another does not)."""
from __future__ import annotations

import unicodedata

import pytest

from app_core.lessons import check_answer, check_task, computed_answer, load_catalog
from app_core.schemas import TEXT
from harness.tiny_gguf import ARCHS, Tiny, write_tiny
from model import load_model

LESSONS = load_catalog().lessons
COMPUTED = [(lesson.id, n, step) for lesson in LESSONS for n, step in enumerate(lesson.steps, start=1)
            if step.question is not None and step.question.needs_model]
TASKS = [(lesson.id, n, step) for lesson in LESSONS for n, step in enumerate(lesson.steps, start=1)
         if step.question is not None and step.question.kind == "task"]
# A text that meets each task's goal on the built-in model, and one that does not.
SOLUTIONS = {
    ("1-llm-basics", 2): ("这是中文数字", "模型并不直接读文字"),
    ("3-architecture-training", 14): ("Roses are red, violets are blue. Roses are red, violets are",
                                      "Roses are red, violets are"),
    ("5-transformer-maths", 12): ("red cat, blue dog, red", "red cat, blue dog, blue"),
}


def step_text(lesson_id: str, n: int) -> str:
    """The text a step is shown with: its own, or the one an earlier step of its lesson set (the class's text is
    the default one when no step set any)."""
    lesson = next(lesson for lesson in LESSONS if lesson.id == lesson_id)
    for step in reversed(lesson.steps[:n]):
        if "text" in step.settings:
            return step.settings["text"]
    return TEXT.default


def visible_text(text: str) -> bool:
    """Text a student can see and type: not only whitespace, no replacement character (a lone byte), no control
    character."""
    return bool(text.strip()) and "\ufffd" not in text and not any(
        unicodedata.category(ch) in ("Cc", "Cs") for ch in text)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lesson_models")
    models = {}
    for arch in ARCHS:
        path = folder / f"{arch}.gguf"
        write_tiny(path, Tiny(arch=arch))
        models[arch] = load_model(path=path)
    return models


def _check_computed(lm, lesson_id: str, n: int, step) -> None:
    question = step.question
    trace = lm.run(step_text(lesson_id, n)) if question.needs_trace else None
    answer = computed_answer(question, lm, trace)
    if question.kind in ("token", "point"):
        assert visible_text(answer.value), (lesson_id, n, repr(answer.value))
        assert check_answer(question, answer, answer.value)                        # the answer typed is right
    if question.kind == "point":
        assert answer.positions and all(0 <= p < trace.n_tokens for p in answer.positions)
        assert check_answer(question, answer, answer.positions[0])
        wrong = next(p for p in range(trace.n_tokens) if p not in answer.positions)
        assert not check_answer(question, answer, wrong)
    if question.kind == "number":
        assert check_answer(question, answer, answer.shown) and not check_answer(question, answer, "-1")


@pytest.mark.parametrize("lesson_id, n, step", COMPUTED, ids=[f"{i}#{n}" for i, n, _ in COMPUTED])
def test_computed_answers_on_the_built_in_model(lm, lesson_id, n, step):
    _check_computed(lm, lesson_id, n, step)


@pytest.mark.parametrize("arch", ARCHS)
def test_computed_answers_on_every_architecture_s_tiny_model(tiny_models, arch):
    for lesson_id, n, step in COMPUTED:
        if step.question.kind == "point" and step.question.compute == "next_token":
            continue            # a random model's next token need not occur in the text: only its visibility counts
        _check_computed(tiny_models[arch], lesson_id, n, step)
    for lesson_id, n, step in COMPUTED:
        if step.question.kind == "point" and step.question.compute == "next_token":
            lm = tiny_models[arch]
            answer = computed_answer(step.question, lm, lm.run(step_text(lesson_id, n)))
            assert visible_text(answer.value), (arch, lesson_id, n, repr(answer.value))


def test_the_built_in_answers_are_the_ones_the_lessons_explain(lm):
    """The steps whose explanation names what SmolLM2 does: "them" -> "keys", the induction head's token."""
    lesson = load_catalog().get("2-attention-maths")
    them = computed_answer(lesson.step(1).question, lm, lm.run(step_text("2-attention-maths", 1)))
    assert them.value == " keys" and them.shown == "#1 ␣keys"
    icl = load_catalog().get("5-transformer-maths").step(11).question
    trace = lm.run(step_text("5-transformer-maths", 11))
    answer = computed_answer(icl, lm, trace)
    assert answer.value == " mosaic" and answer.positions == (8,)
    generate = load_catalog().get("3-architecture-training").step(13).question
    assert computed_answer(generate, lm, lm.run("The capital of France is")).value == " Paris"


@pytest.mark.parametrize("lesson_id, n, step", TASKS, ids=[f"{i}#{n}" for i, n, _ in TASKS])
def test_each_task_can_be_done_on_the_built_in_model(lm, lesson_id, n, step):
    done, not_done = SOLUTIONS[(lesson_id, n)]
    assert check_task(step.question, lm, done).done
    assert not check_task(step.question, lm, not_done).done
    assert check_answer(step.question, computed_answer(step.question), done, lm=lm)
    assert not check_answer(step.question, computed_answer(step.question), done)          # no model: not checked


def test_a_task_says_what_the_model_did(lm):
    tokens = next(step for lesson_id, n, step in TASKS if (lesson_id, n) == ("1-llm-basics", 2)).question
    assert str(check_task(tokens, lm, "这是中文数字").seen) == "6 characters, 6 tokens."
    assert str(check_task(tokens, lm, "").seen) == "0 characters, 0 tokens."
    attends = next(step for lesson_id, n, step in TASKS if (lesson_id, n) == ("5-transformer-maths", 12)).question
    assert str(check_task(attends, lm, "red cat, blue dog, red").seen) == \
        "From the last token, layer 17, head 3 looks most at #1 ␣cat."
