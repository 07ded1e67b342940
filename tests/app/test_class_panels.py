"""The live class in AppTest: a teacher's session and students' sessions in one process share the in-memory store
(no ATLAS_REDIS_URL): start a class, follow, detach and rejoin, live answers and reveal, forged and ended codes."""
from __future__ import annotations

import pytest

from app_core.classroom import class_store, codes
from app_core.classroom.views import JOIN, TEACH
from tests.app.apptest import open_page, rerun, warnings
from tests.app.models_folder import SHAPES

LESSON = "1-llm-basics"


@pytest.fixture(autouse=True)
def memory_store(monkeypatch):
    monkeypatch.delenv("ATLAS_REDIS_URL", raising=False)


def start_class(**params):
    """A presenter's session that started a class: (AppTest, code, secret)."""
    teacher = open_page("attention", present="1", **params)
    act(teacher, teacher.button(key="w_class_start").click())
    code, secret = codes.read_teacher_token(teacher.query_params[TEACH][0]
                                            if isinstance(teacher.query_params[TEACH], list)
                                            else teacher.query_params[TEACH])
    return teacher, code, secret


def act(at, _element):
    """Run the app after a widget's click or new value (AppTest's element calls only record it)."""
    return rerun(at)


def param(at, name):
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def test_students_follow_the_teacher_and_never_see_the_secret():
    teacher, code, secret = start_class()
    assert class_store().version(code) is not None
    student = open_page("attention", **{JOIN: codes.shown(code).lower()})
    assert param(student, JOIN) == code
    assert secret not in str(dict(student.query_params))
    act(teacher, teacher.slider(key="layer").set_value(5))
    act(teacher, teacher.slider(key="head").set_value(3))
    assert class_store().state(code).view.params["layer"] == "5"
    rerun(student)
    assert (student.slider(key="layer").value, student.slider(key="head").value) == (5, 3)
    assert secret not in str(dict(student.query_params)) and param(student, "layer") == "5"
    teacher_share = teacher.session_state["_class_published"][1]
    assert secret not in str(teacher_share) and TEACH not in teacher_share.params


def test_a_student_explores_on_their_own_then_rejoins():
    teacher, code, _ = start_class()
    student = open_page("attention", **{JOIN: code})
    act(student, student.button(key="w_class_detach").click())
    act(teacher, teacher.slider(key="layer").set_value(7))
    act(student, student.slider(key="layer").set_value(2))
    assert student.slider(key="layer").value == 2                   # the teacher's change waits
    assert class_store().state(code).view.params["layer"] == "7"    # and the student's did not reach the class
    act(student, student.button(key="w_class_follow").click())
    rerun(student)
    assert student.slider(key="layer").value == 7


def test_forged_and_ended_codes_open_the_normal_app_with_a_message():
    forged = open_page("attention", **{JOIN: codes.new_code()})
    assert "No class is open with the code" in warnings(forged) and JOIN not in forged.query_params
    bad = open_page("attention", **{JOIN: "<b>"})
    assert "is not a class code" in warnings(bad)
    teacher, code, secret = start_class()
    act(teacher, teacher.button(key="w_class_end").click())
    ended = open_page("attention", **{JOIN: code})
    assert "has ended" in warnings(ended)
    stolen = open_page("attention", **{TEACH: codes.teacher_token(code, codes.new_secret())})
    assert "not valid" in warnings(stolen) or "has ended" in warnings(stolen)
    assert "_class_teaching" not in stolen.session_state


def test_students_answer_the_teachers_question_and_reveal_shows_the_answer_everywhere():
    teacher, code, secret = start_class(lesson=LESSON, step="5")          # "Which learnt vector does RMSNorm keep?"
    assert class_store().state(code).view.question == f"{LESSON}/5"
    students = [open_page("attention", **{JOIN: code}) for _ in range(3)]
    assert all(s.session_state["_lesson"] == (LESSON, 5) for s in students)   # on the teacher's step
    for student, choice in zip(students, (1, 1, 2), strict=True):
        student.radio(key=f"class_answer_{LESSON}/5").set_value(choice)
        act(student, student.button(key="w_class_send").click())
    assert class_store().answers(code, secret) == {"1": 2, "2": 1}
    rerun(teacher)
    bars = [p.proto.text for p in teacher.get("progress")]
    assert bars == ["the scale γ · 2", "the shift β · 1", "both · 0"], bars
    assert any("3 of 3 answered" in c.value for c in teacher.caption)
    act(teacher, teacher.button(key="w_class_reveal").click())
    for student in students:
        rerun(student)
        shown = {s.value for s in student.success}           # the class's box, and the lesson's own question
        assert shown == {"Answer: the scale γ"}, shown
    assert not class_store().answer(code, "late", f"{LESSON}/5", "3")


def test_an_unreachable_redis_says_so_and_the_app_still_works(monkeypatch):
    from tests.e2e.browser_harness import free_port

    monkeypatch.setenv("ATLAS_REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")     # nothing listens there
    student = open_page("attention", **{JOIN: codes.new_code()})
    assert "cannot be reached" in warnings(student)
    teacher = open_page("attention", present="1")
    act(teacher, teacher.button(key="w_class_start").click())
    assert "cannot be reached" in warnings(teacher) and TEACH not in teacher.query_params
    assert teacher.get("plotly_chart")                                              # the view is drawn


def test_students_follow_the_teachers_model_but_keep_their_own_language(models_dir):
    teacher, code, _ = start_class()
    student = open_page("attention", lang="zh", **{JOIN: code})
    act(teacher, teacher.selectbox(key="w_model").select_index(1 + sorted(SHAPES).index("tiny-qwen3")))
    act(teacher, teacher.slider(key="layer").set_value(3))
    assert {"model": "tiny-qwen3", "layer": "3"}.items() <= class_store().state(code).view.params.items()
    rerun(student)
    assert student.session_state["model"] == "tiny-qwen3" and student.slider(key="layer").value == 3
    assert param(student, "lang") == "zh" and "lang" not in class_store().state(code).view.params
    assert student.button(key="w_class_detach").label == "自己探索"


def test_students_follow_the_teacher_through_a_lesson_onto_another_page():
    teacher, code, _ = start_class(lesson=LESSON, step="6")                 # on the Inside page
    student = open_page("attention", **{JOIN: code})
    assert student.session_state["_lesson"] == (LESSON, 6) and student.session_state["_run"][0] == "inside"
    act(teacher, teacher.button(key="w_lesson_next").click())                # step 7 is on the Positional page
    assert teacher.session_state["_run"][0] == "positional"
    assert class_store().state(code).view.page == "positional"
    assert class_store().state(code).view.question == f"{LESSON}/7"
    rerun(student)
    assert student.session_state["_lesson"] == (LESSON, 7)
    assert student.session_state["_run"][0] == "positional"
    assert student.get("plotly_chart")
