"""A class's answers as an anonymous CSV: steps with a question in order, counts per answer (every choice listed),
whether each answer is right, the share right per step; a point question's clicks by position and token."""
from __future__ import annotations

import csv
import io

from app_core.lessons import parse_lesson
from app_core.lessons.results import HEADER, PointKey, class_results_csv

LESSON = '''
title = { en = "L", zh = "课" }
summary = { en = "S", zh = "概" }

[[steps]]
page = "attention"
text = { en = "No question", zh = "没有问题" }

[[steps]]
page = "attention"
text = { en = "Choice", zh = "选择" }
question.kind = "choice"
question.ask = { en = "Which?", zh = "哪个？" }
question.choices = [{ en = "a", zh = "甲" }, { en = "b", zh = "乙" }, { en = "c", zh = "丙" }]
question.answer = 2
question.why = { en = ".", zh = "。" }

[[steps]]
page = "attention"
text = { en = "Point", zh = "点选" }
question.kind = "point"
question.compute = "top_attended"
question.ask = { en = "Click it", zh = "点它" }
question.why = { en = ".", zh = "。" }

[[steps]]
page = "attention"
text = { en = "Number", zh = "数字" }
question.kind = "number"
question.answer = 45
question.ask = { en = "How many, \\"exactly\\"?", zh = "多少？" }
question.why = { en = ".", zh = "。" }
'''


def rows(text: str) -> list[dict]:
    table = list(csv.reader(io.StringIO(text)))
    assert tuple(table[0]) == HEADER
    return [dict(zip(HEADER, row, strict=True)) for row in table[1:]]


def test_counts_per_answer_and_the_share_right_in_step_order():
    lesson = parse_lesson(LESSON, "demo")
    sent = {2: ["2", "1", "2", "2", "9"], 3: ["1", "1", "4"], 4: ["right", "wrong", "right", "right"]}
    points = {3: PointKey(tokens=["The", " keys", " that", " he", " them"], right=frozenset({1}))}
    out = rows(class_results_csv(lesson, "en", sent, points))
    assert [r["step"] for r in out] == ["2", "2", "2", "2", "3", "3", "4", "4"]
    choice = [(r["answer"], r["right"], r["count"]) for r in out if r["step"] == "2"]
    assert choice == [("b", "yes", "3"), ("a", "no", "1"), ("9", "no", "1"), ("c", "no", "0")]
    assert {r["step_answers"] for r in out if r["step"] == "2"} == {"5"}
    assert {r["step_share_right"] for r in out if r["step"] == "2"} == {"0.600"}
    point = [(r["answer"], r["right"], r["count"]) for r in out if r["step"] == "3"]
    assert point == [("#1  keys", "yes", "2"), ("#4  them", "no", "1")]
    assert [r["step_share_right"] for r in out if r["step"] == "3"] == ["0.667", "0.667"]
    number = [(r["answer"], r["right"], r["count"], r["question"]) for r in out if r["step"] == "4"]
    assert number == [("right", "yes", "3", 'How many, "exactly"?'), ("wrong", "no", "1", 'How many, "exactly"?')]


def test_a_step_nobody_answered_keeps_its_row_and_the_language_is_the_teacher_s():
    lesson = parse_lesson(LESSON, "demo")
    out = rows(class_results_csv(lesson, "zh", {}))
    assert [(r["step"], r["answer"], r["count"], r["step_share_right"]) for r in out] == [
        ("2", "甲", "0", ""), ("2", "乙", "0", ""), ("2", "丙", "0", ""), ("3", "", "0", ""), ("4", "", "0", "")]
    assert out[0]["question"] == "哪个？"


def test_a_class_store_s_tally_gives_the_same_csv():
    lesson = parse_lesson(LESSON, "demo")
    listed = {2: ["2", "1", "2", "2"], 4: ["right", "wrong"]}
    tallied = {2: {"2": 3, "1": 1}, 4: {"wrong": 1, "right": 1}}
    assert class_results_csv(lesson, "en", listed) == class_results_csv(lesson, "en", tallied)
