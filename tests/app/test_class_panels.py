"""The live class in AppTest: a teacher's session and students' sessions in one process share the in-memory store
(no ATLAS_REDIS_URL): start a class, follow, detach and rejoin, live answers and reveal, forged and ended codes; the
teacher's key never in an address; the caps on classes; a real Redis stopped mid-class (End class and a join wait
for it, and say so)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from app_core.classroom import class_store, codes, follower_key, followers
from app_core.classroom import redis_store as redis_module
from app_core.classroom.views import JOIN, TEACH
from harness.apptest import open_page, rerun, warnings
from tests.app.models_folder import SHAPES

DEPLOY_REDIS = Path(__file__).resolve().parents[2] / "deploy/redis.conf"

LESSON = "1-llm-basics"


@pytest.fixture(autouse=True)
def memory_store(monkeypatch):
    monkeypatch.delenv("ATLAS_REDIS_URL", raising=False)


def start_class(**params):
    """A presenter's session that started a class: (AppTest, code, secret). The teacher's address holds no key."""
    teacher = open_page("attention", present="1", **params)
    act(teacher, teacher.button(key="w_class_start").click())
    code, secret = teacher.session_state["_class_teaching"]
    assert TEACH not in teacher.query_params and secret not in str(dict(teacher.query_params))
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
    assert secret not in str(dict(teacher.query_params)) and TEACH not in teacher.query_params
    me = student.session_state["_class_me"]
    assert followers.is_signed(follower_key(), code, me)             # the follower's id: issued by the server
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
    teacher, code, secret = start_class()
    stolen = open_page("attention", **{TEACH: codes.teacher_token(code, secret)})      # a key read off a screen
    assert "links no longer carry" in warnings(stolen) and TEACH not in stolen.query_params
    assert "_class_teaching" not in stolen.session_state and class_store().version(code) == 1


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
    from harness.browser import free_port

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
    """The lesson's first step whose next step is on another page (read from the catalog, whatever the lesson's
    steps are today): the teacher's Next takes the class there, with the step's question."""
    from app_core.lessons import load_catalog

    lesson = load_catalog().get(LESSON)
    n = next(i for i in range(1, len(lesson.steps)) if lesson.step(i).page != lesson.step(i + 1).page)
    here, there = lesson.step(n).page, lesson.step(n + 1).page
    teacher, code, _ = start_class(lesson=LESSON, step=str(n))
    student = open_page("attention", **{JOIN: code})
    assert student.session_state["_lesson"] == (LESSON, n) and student.session_state["_run"][0] == here
    act(teacher, teacher.button(key="w_lesson_next").click())
    assert teacher.session_state["_run"][0] == there
    assert class_store().state(code).view.page == there
    asked = lesson.step(n + 1).question
    assert class_store().state(code).view.question == (f"{LESSON}/{n + 1}" if asked is not None else None)
    rerun(student)
    assert student.session_state["_lesson"] == (LESSON, n + 1)
    assert student.session_state["_run"][0] == there


def test_a_session_starts_a_bounded_number_of_classes_and_the_server_holds_a_bounded_number(monkeypatch):
    monkeypatch.setattr("app_pages.classroom.teacher.MAX_STARTED", 2)
    teacher, _, _ = start_class()
    act(teacher, teacher.button(key="w_class_end").click())
    act(teacher, teacher.button(key="w_class_start").click())
    act(teacher, teacher.button(key="w_class_end").click())
    act(teacher, teacher.button(key="w_class_start").click())
    assert "has started 2 classes" in warnings(teacher) and "_class_teaching" not in teacher.session_state
    monkeypatch.setenv("ATLAS_MAX_CLASSES", "1")                       # a fresh store holding one class
    start_class()
    late = open_page("attention", present="1")
    act(late, late.button(key="w_class_start").click())
    assert "as many classes as it can" in warnings(late) and "_class_teaching" not in late.session_state


def test_a_redis_stopped_mid_class_keeps_the_class_its_key_and_a_students_join(monkeypatch):
    """Redis (deploy/redis.conf: a password, a snapshot on shutdown) stops mid-class: End class says it could not
    end the class and keeps it (the key, and so the cookie); a student opening the join link keeps join= in the
    address and is told they join when the store answers. Redis back: the student joins, End class ends it."""
    from harness.redis_server import redis_server

    with redis_server(DEPLOY_REDIS) as server:
        monkeypatch.setenv("ATLAS_REDIS_URL", server.url)
        teacher, code, secret = start_class()
        server.stop()
        teacher.button(key="w_class_end").click()
        act(teacher, None)
        assert "could not be ended" in warnings(teacher)
        assert teacher.session_state["_class_teaching"] == (code, secret)
        assert "_class_forget" not in teacher.session_state                 # the cookie is not cleared
        student = open_page("attention", **{JOIN: code})
        assert "joins the class" in warnings(student) and param(student, JOIN) == code
        assert "_class_joined" not in student.session_state
        server.start()
        time.sleep(redis_module.RETRY_AFTER_S)
        rerun(student)                                                      # (the retry fragment's rerun)
        assert student.session_state["_class_joined"] == code and param(student, JOIN) == code
        teacher.button(key="w_class_end").click()
        act(teacher, None)
        assert "_class_teaching" not in teacher.session_state and class_store().version(code) is None
        assert teacher.session_state["_class_forget"] == code
