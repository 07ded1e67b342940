"""Lesson files: the built-in lessons' shape, each kind of broken file with its message (also files that make the
TOML reader itself fail), the model's facts in a step's text, the snippet a view gives, the lesson link's params,
and the check of a student's answer."""
from __future__ import annotations

import re
import tomllib

import pytest

from app_core import schemas as S
from app_core.lessons import LessonError, check_answer, computed_answer, load_catalog, parse_lesson
from app_core.lessons.answers import parse_number
from app_core.lessons.facts import NAMES, fill, model_facts
from app_core.lessons.loading import ENV_DIR
from app_core.lessons.views import read_lesson_link, step_settings, step_snippet
from app_core.link import Context, decode

GOOD = '''
title.en = "A lesson"
title.zh = "一课"
summary.en = "What it shows."
summary.zh = "它讲什么。"

[[steps]]
page = "causal-mask"
settings = { layer = 3, head = 2, n = 7, side = true }
text.en = "The mask, $j > i$."
text.zh = "掩码，$j > i$。"
question.kind = "choice"
question.ask = { en = "Which?", zh = "哪个？" }
question.choices = [{ en = "a", zh = "甲" }, { en = "b", zh = "乙" }]
question.answer = 2
question.why = { en = "Because.", zh = "因为。" }
'''


def broken(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


def test_the_built_in_lessons_follow_the_course():
    catalog = load_catalog()
    assert not catalog.broken, [(b.file, str(b.error)) for b in catalog.broken]
    assert len(catalog.lessons) >= 5
    for lesson in catalog.lessons:
        assert 8 <= len(lesson.steps) <= 20, lesson.id
        assert any(step.question is not None for step in lesson.steps), lesson.id
        for step in lesson.steps:
            assert step.text["en"] and step.text["zh"]
    steps = [step for lesson in catalog.lessons for step in lesson.steps]
    kinds = [step.question.kind for step in steps if step.question is not None]
    assert len(kinds) >= 30 and kinds.count("point") >= 3 and kinds.count("task") >= 2
    assert sum(step.predict for step in steps) >= 5
    first = catalog.lessons[0]
    last = first.steps[-1]
    assert (last.page, last.settings) == ("parameters", {"preset": "Qwen3-8B"})
    assert "14{,}336" in last.text["en"] and "12{,}288" in last.text["en"]
    assert "14{,}336" in last.text["zh"] and "12{,}288" in last.text["zh"]
    assert computed_answer(last.question).value == 8_190_735_360


def test_a_good_file_reads_as_the_link_codec_reads_its_settings():
    lesson = parse_lesson(GOOD, "demo")
    step = lesson.steps[0]
    assert lesson.id == "demo" and step.page == "causal-mask"
    assert step.settings == {"layer": "3", "head": "2", "n": "7", "side": "1"}
    ctx = Context(n_layers=30, n_heads=9, head_dim=64, vocab_size=49152, n_tokens=20)
    values, reset, notes = step_settings(step, ctx)
    assert values == {"layer": 3, "head": 2, "mask_n": 7, "mask_side": True} and not notes
    assert "sink" in reset and S.TEXT.key not in reset and S.PRESENT.key not in reset
    # a model with fewer layers: the link codec clamps the layer and says so
    values, _, notes = step_settings(step, Context(n_layers=2, n_heads=9, head_dim=64, vocab_size=10, n_tokens=20))
    assert values["layer"] == 1 and "layer=3 is outside 0–1" in notes[0]


@pytest.mark.parametrize("source, message", [
    ("title.en = [", "Bad TOML syntax"),
    (broken('page = "causal-mask"', 'page = "causal"'), "step 1: 'causal' is not a page of this app"),
    (broken('page = "causal-mask"', 'page = "lessons"'), "step 1: 'lessons' is not a page of this app"),
    (broken("layer = 3", "lyer = 3"), "step 1: the causal-mask page has no setting 'lyer'"),
    (broken("layer = 3", "present = true"), "step 1: the causal-mask page has no setting 'present'"),
    (broken("layer = 3", 'layer = "three"'), "step 1: layer='three' is not a whole number"),
    (broken("n = 7", "n = 1"), "step 1: n=1 is outside 2–"),
    (broken('text.zh = "掩码，$j > i$。"', ""), "step 1's text has no zh text."),
    (broken('title.en = "A lesson"', ""), "title has no en text."),
    (broken('summary.zh = "它讲什么。"', 'summary.zh = " "'), "summary has no zh text."),
    (broken('question.kind = "choice"', 'question.kind = "essay"'), "the question's kind must be one of"),
    (broken("question.answer = 2", "question.answer = 3"), "answer must be the number of the right choice, 1 to 2"),
    (broken("question.answer = 2", ""), "needs either an answer or a compute"),
    (broken('question.why = { en = "Because.", zh = "因为。" }', ""), "step 1's explanation (why) must be a table"),
    (broken('question.kind = "choice"', 'question.kind = "number"\nquestion.compute = "next_token"')
     .replace("question.answer = 2", ""),
     "a number question can compute n_tokens, param_count, model_fact, closed_gates, not 'next_token'"),
    (broken('question.kind = "choice"', 'question.kind = "number"\nquestion.compute = "param_count"\n'
                                         'question.preset = "GPT-5"').replace("question.answer = 2", ""),
     "preset 'GPT-5' is not one of the calculator's"),
    (broken('question.kind = "choice"', 'question.kind = "token"').replace("question.answer = 2",
                                                                             "question.answer = 3"),
     "a token question's answer must be the token's text"),
    (GOOD.split("[[steps]]")[0], "The lesson has no steps"),
    (broken("[[steps]]", "[[steps]]\nimage = 'x.png'"), "step 1: unknown key 'image'"),
    (broken("[[steps]]", "[[steps]]\npredict = 1"), "step 1: predict must be true or false"),
    (GOOD.split("question.kind")[0] + "predict = true\n", "step 1: predict = true hides the view until the question"),
    (broken("question.answer = 2", "question.answer = 2\nquestion.hint = 'x'"), "the question has no key 'hint'"),
    (broken("question.answer = 2", "question.answer = 2\nquestion.goal = 'max_tokens'"),
     "goal belongs to a task question"),
    (broken('question.kind = "choice"', 'question.kind = "point"').replace("question.answer = 2", ""),
     "a point question's answer is computed"),
    (broken('question.kind = "choice"', 'question.kind = "point"\nquestion.compute = "n_tokens"')
     .replace("question.answer = 2", ""), "a point question can compute next_token, top_attended, not 'n_tokens'"),
    (broken('question.kind = "choice"', 'question.kind = "task"\nquestion.goal = "rhyme"')
     .replace("question.answer = 2", ""), "a task's goal must be one of next_token, max_tokens, attends"),
    (broken('question.kind = "choice"', 'question.kind = "task"\nquestion.goal = "next_token"')
     .replace("question.answer = 2", ""), "a next_token task needs target = the token's text"),
    (broken('question.kind = "choice"', 'question.kind = "task"\nquestion.goal = "max_tokens"\nquestion.n = 0')
     .replace("question.answer = 2", ""), "the question's n must be a whole number"),
    (broken('question.kind = "choice"', 'question.kind = "task"\nquestion.goal = "max_tokens"\nquestion.n = 5')
     , "a task is checked by its goal: it has no answer or compute"),
    (broken('question.kind = "choice"', 'question.kind = "number"\nquestion.compute = "model_fact"\n'
                                         'question.fact = "n_legs"').replace("question.answer = 2", ""),
     "model_fact needs fact = one of n_layers"),
    (broken("question.answer = 2", "question.answer = 2\nquestion.without_sink = 1"),
     "the question's without_sink must be true or false"),
])
def test_each_kind_of_broken_file_says_what_is_wrong(source, message):
    with pytest.raises(LessonError) as err:
        parse_lesson(source, "demo")
    assert message in str(err.value)


def test_broken_files_are_listed_and_the_rest_still_load(tmp_path, monkeypatch):
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "typo.toml").write_text(broken("layer = 3", "lyer = 3"), encoding="utf-8")
    (tmp_path / "syntax.toml").write_text("title = {", encoding="utf-8")
    (tmp_path / "latin1.toml").write_bytes(GOOD.replace("一课", "café").encode("latin-1", "replace"))
    (tmp_path / "1-llm-basics.toml").write_text(GOOD, encoding="utf-8")     # a built-in lesson's id
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    catalog = load_catalog()
    errors = {b.file: str(b.error) for b in catalog.broken}
    assert catalog.get("good") is not None and catalog.get("1-llm-basics").steps[0].page == "inside"
    assert "the causal-mask page has no setting 'lyer'" in errors["typo.toml"]
    assert errors["syntax.toml"].startswith("Bad TOML syntax")
    assert errors["latin1.toml"] == "The file is not UTF-8 text."
    assert errors["1-llm-basics.toml"] == "Another lesson already has the id 1-llm-basics."
    assert [lesson.id for lesson in catalog.lessons][-1] == "good"      # teachers' lessons after the built-in ones


def test_files_the_toml_reader_itself_cannot_read_are_listed_with_their_error(tmp_path, monkeypatch):
    """Any exception reading a file raises is the file's error: 100,000 nested arrays (RecursionError in tomllib),
    a 5,000-digit integer (ValueError: Python's limit on converting long integers)."""
    (tmp_path / "deep.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n" + GOOD, encoding="utf-8")
    (tmp_path / "long.toml").write_text("order = " + "9" * 5_000 + "\n" + GOOD, encoding="utf-8")
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    catalog = load_catalog()
    errors = {b.file: str(b.error) for b in catalog.broken}
    assert errors["deep.toml"] == "The file nests tables or arrays too deeply to be read."
    assert errors["long.toml"].startswith("The file cannot be read: ValueError: Exceeds the limit")
    assert len(errors["long.toml"]) < 260
    assert catalog.get("good") is not None and catalog.get("1-llm-basics") is not None


def test_a_step_names_the_model_s_facts(lm):
    facts = model_facts(lm.config)
    assert facts["n_heads"] == "9" and facts["n_kv_heads"] == "3" and facts["vocab_size"] == "49,152"
    assert facts["group"] == "3" and facts["rope_pairs"] == "32" and facts["attention_kind"] == "GQA"
    assert facts["mlp_params"] == f"{3 * 576 * 1536:,}" and facts["embedding_params"] == f"{49152 * 576:,}"
    assert fill("$d_{model}$ = {d_model}, {answer}, {n_legs}, {n_layers}", facts) == \
        "$d_{model}$ = 576, {answer}, {n_legs}, 30"


# a brace pair that is not LaTeX's (after a letter, _, ^, } or \\) must be a fact's name (or the answer's)
_PLACEHOLDER_LIKE = re.compile(r"(?<![\w\\}^_])\{([a-z][a-z_]*)\}")


def test_the_built_in_lessons_name_only_facts_that_exist():
    for lesson in load_catalog().lessons:
        for n, step in enumerate(lesson.steps, start=1):
            q = step.question
            texts = [*step.text.values()] + ([*q.ask.values(), *q.why.values(),
                                               *(t for c in q.choices for t in c.values())] if q else [])
            for text in texts:
                unknown = set(_PLACEHOLDER_LIKE.findall(text)) - {*NAMES, "answer"}
                assert not unknown, (lesson.id, n, unknown)


def test_the_snippet_of_a_view_is_a_step_that_opens_that_view():
    query = {"view": "head", "layer": "17", "head": "5", "sink": "1", "text": 'Count: 1, 2, 3 "<b>"\n中文 🙂',
             "present": "1", "lang": "zh"}
    snippet = step_snippet("attention", query)
    lesson = parse_lesson(GOOD.split("[[steps]]")[0] + snippet, "demo")
    step = lesson.steps[0]
    kept = {k: v for k, v in query.items() if k not in ("present", "lang")}
    assert step.page == "attention" and step.settings == kept
    ctx = Context(n_layers=30, n_heads=9, head_dim=64, vocab_size=49152, n_tokens=12)
    assert step_settings(step, ctx)[0] == decode(kept, S.schema("attention"), ctx)[0]
    assert tomllib.loads(snippet)["steps"][0]["settings"]["layer"] == 17


def test_a_lesson_link_names_lesson_and_step():
    assert read_lesson_link({"lesson": "2-attention-maths", "step": "4"}) == ("2-attention-maths", 4)
    assert read_lesson_link({"lesson": "x", "step": "four"}) == ("x", 1)
    assert read_lesson_link({"step": "4"}) == (None, 1)


def test_numbers_are_read_as_students_write_them():
    assert parse_number("8,190,735,360") == 8_190_735_360
    assert parse_number("8.19B") == pytest.approx(8.19e9)
    assert parse_number("81.9亿") == pytest.approx(8.19e9)
    assert parse_number("1.5e3") == 1500 and parse_number("12 k") == 12_000
    assert parse_number("many") is None and parse_number("inf") is None
    assert parse_number("15%") == 15


def test_answers_are_checked_within_the_question_s_tolerance():
    lesson = parse_lesson(GOOD, "demo")
    choice = lesson.steps[0].question
    answer = computed_answer(choice)
    assert check_answer(choice, answer, 2) and not check_answer(choice, answer, 1)
    qwen = load_catalog().get("1-llm-basics").steps[-1].question
    total = computed_answer(qwen)
    assert check_answer(qwen, total, "8,190,735,360") and check_answer(qwen, total, "8.19B")
    assert check_answer(qwen, total, "8.0B")                          # a prediction: within 3%
    assert not check_answer(qwen, total, "7.9B") and not check_answer(qwen, total, "")
    count = parse_lesson(broken('question.kind = "choice"', 'question.kind = "number"').replace(
        "question.answer = 2", "question.answer = 12"), "demo").steps[0].question
    assert check_answer(count, computed_answer(count), "12") and not check_answer(count, computed_answer(count), "13")
