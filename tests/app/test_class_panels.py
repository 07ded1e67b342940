"""The live class in AppTest: a teacher's session and students' sessions in one process share the in-memory store
(no ATLAS_REDIS_URL): start a class, follow, detach and rejoin, live answers and reveal, forged and ended codes; the
teacher's key never in an address; the caps on classes; a real Redis stopped mid-class (End class and a join wait
for it, and say so). Every kind of question in a class: a predict step held on the students' screens until they send
or the teacher reveals, a point question's clicks on the teacher's strip beside the model's row (the model's own run
the reference), a task checked on the model, the class's results as CSV (from the panel, and after End class)."""
from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from app_core.classroom import class_store, codes, follower_key, followers
from app_core.classroom import redis_store as redis_module
from app_core.classroom.views import JOIN, TEACH
from app_core.lessons import load_catalog
from harness.apptest import array, figures, open_page, rerun, warnings, widget_values
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


# ------------------------------------------------------------------------------------ every kind of question
HELD = "Predict first."


def first_step(wanted):
    """(lesson, n) of the first built-in step with a question that wanted(step) accepts (whatever the lessons' steps
    are today)."""
    return next((lesson, n) for lesson in load_catalog().lessons for n, step in enumerate(lesson.steps, start=1)
                if step.question is not None and wanted(step))


def page_figures(at) -> list[dict]:
    """The page's figures (not the class strip's clicks)."""
    return [f for f in figures(at) if not (f["data"] and f["data"][0].get("name") == "the class's clicks")]


def held(at) -> bool:
    return any(HELD in i.value for i in at.info) and not page_figures(at)


def texts(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.success])


@pytest.fixture
def downloads(monkeypatch):
    """{file name: what the app gave its download button}: the data, or the callable made when clicked (Streamlit's
    media file manager, as the app's server runs it)."""
    found = {}
    add, add_deferred = MediaFileManager.add, MediaFileManager.add_deferred

    def spy_add(self, data, mimetype, coordinates, file_name=None, *args, **kwargs):
        found[file_name] = data
        return add(self, data, mimetype, coordinates, file_name, *args, **kwargs)

    def spy_deferred(self, made, mimetype, coordinates, file_name=None, **kwargs):
        found[file_name] = made
        return add_deferred(self, made, mimetype, coordinates, file_name, **kwargs)
    monkeypatch.setattr(MediaFileManager, "add", spy_add)
    monkeypatch.setattr(MediaFileManager, "add_deferred", spy_deferred)
    return found


def rows(data) -> list[dict]:
    text = data() if callable(data) else data
    return list(csv.DictReader(io.StringIO(text.decode() if isinstance(text, bytes) else text)))


def test_a_predict_point_step_is_held_until_a_student_sends_or_the_teacher_reveals(lm):
    """The first built-in predict step with a point question: held on both students' screens (and the teacher's);
    one student clicks the token the model's head attends to most and sends: their chart opens, the other's stays
    held; the teacher's strip shows the click over the text's tokens; Reveal opens the chart everywhere and puts the
    model's real attention row beside the clicks."""
    lesson, n = first_step(lambda step: step.predict and step.question.kind == "point"
                           and step.question.compute == "top_attended")
    key, question, text = f"{lesson.id}/{n}", lesson.step(n).question, lesson.step(n).query()["text"]
    teacher, code, secret = start_class(lesson=lesson.id, step=str(n))
    view = class_store().state(code).view
    assert (view.question, view.predict, view.revealed) == (key, True, False)
    students = [open_page("attention", **{JOIN: code}) for _ in range(2)]
    for at in (teacher, *students):
        assert held(at), at.session_state["_run"][0]
    for student in students:
        assert student.session_state["_lesson_class_hold"] == (lesson.id, n)
        assert f"lesson_answer_{lesson.id}_{n}" not in widget_values(student)       # the class's box asks it
        assert not [b for b in student.button if b.key == f"w_lesson_reveal_{n}"]     # the teacher reveals
    assert not [b for b in teacher.button if b.key in (f"w_lesson_check_{n}", f"w_lesson_reveal_{n}")]
    assert "The class answers on their own screens" in texts(teacher)

    trace = lm.run(text)                                                       # the reference: the model's own run
    at = question.position % trace.n_tokens
    row = np.asarray(trace.attention[question.layer, question.head, at, : at + 1], dtype=np.float64)   # [at + 1]
    if question.without_sink:
        row[0] = 0.0
    right = int(np.argmax(row))
    sender, waiter = students
    sender.pills(key=f"class_answer_{key}").set_value(right)
    act(sender, sender.button(key="w_class_send").click())
    assert not held(sender) and page_figures(sender)                          # sent: the chart opens
    assert "Sent. You can change your answer" in texts(sender)
    rerun(waiter)
    assert held(waiter)                                                       # not answered: still held
    rerun(teacher)
    assert held(teacher) and "1 of 2 answered" in texts(teacher)
    clicks = [f for f in figures(teacher) if f["data"][0]["name"] == "the class's clicks"]
    assert len(clicks) == 1 and len(clicks[0]["data"]) == 1                   # the model's row waits for Reveal
    share = array(clicks[0]["data"][0]["y"])
    assert share.shape == (trace.n_tokens,) and share[right] == 1 and share.sum() == 1
    assert "right" not in " ".join(c.value for c in teacher.caption if "%" in c.value)

    act(teacher, teacher.button(key="w_class_reveal").click())
    assert not held(teacher) and class_store().state(code).view.revealed
    chart = next(f for f in figures(teacher) if f["data"][0]["name"] == "the class's clicks")
    model = array(chart["data"][1]["y"])
    assert chart["data"][1]["name"] == "the model"
    np.testing.assert_allclose(model[: at + 1], row, rtol=1e-5, atol=1e-7)
    assert "100% right" in texts(teacher)
    for student in students:
        rerun(student)
        assert not held(student) and page_figures(student)                    # Reveal opens it everywhere
    assert "Your answer was right." in texts(sender)
    assert f"Answer: #{right}" in texts(waiter).replace("\\", "")
    assert not class_store().answer(code, waiter.session_state["_class_me"], key, "1")   # revealed: too late


def test_a_task_is_checked_on_the_model_and_the_class_results_download_as_csv(lm, downloads):
    """The first built-in "attends" task: one student's text meets the goal on the model, the other's does not
    (what the model did is said on each screen, checked here on the model's own run); the teacher's strip counts
    right and wrong; the class's results download from the panel at any time, and after End class."""
    lesson, n = first_step(lambda step: step.question.kind == "task" and step.question.goal == "attends")
    key, question = f"{lesson.id}/{n}", lesson.step(n).question
    teacher, code, secret = start_class(lesson=lesson.id, step=str(n))
    students = [open_page("attention", **{JOIN: code}) for _ in range(2)]

    def looks_at(text: str) -> str:
        """The token the task's head looks at most from the text's last token, the sink left out (the model's run)."""
        trace = lm.run(text)
        row = np.asarray(trace.attention[question.layer, question.head, -1], dtype=np.float64)    # [T]
        return lm.decode([trace.token_ids[int(np.argmax(row[1:])) + 1]]).strip()
    good, bad = "red cat, blue dog, red", "blue dog, red cat, blue"
    assert looks_at(good) == question.target and looks_at(bad) != question.target
    for student, text in zip(students, (good, bad), strict=True):
        student.text_area(key=f"class_answer_{key}").set_value(text)
        act(student, student.button(key="w_class_send").click())
        assert "looks most at" in texts(student)
    assert class_store().answers(code, secret) == {"right": 1, "wrong": 1}
    rerun(teacher)
    bars = [p.proto.text for p in teacher.get("progress")]
    assert bars == ["Right answer · 1", "Not right · 1"], bars
    assert "2 of 2 answered" in texts(teacher)

    made = downloads[f"class-results-{lesson.id}.csv"]                        # the panel's: made when clicked
    assert callable(made)
    step_rows = [r for r in rows(made) if r["step"] == str(n)]
    assert {(r["answer"], r["right"], r["count"]) for r in step_rows} == {("right", "yes", "1"), ("wrong", "no", "1")}
    assert {r["step_share_right"] for r in step_rows} == {"0.500"}
    asked = [int(s) for s in dict.fromkeys(r["step"] for r in rows(made))]
    assert asked == [i for i, step in enumerate(lesson.steps, start=1) if step.question is not None]   # in order
    students[1].text_area(key=f"class_answer_{key}").set_value(good)        # the last answer counts
    act(students[1], students[1].button(key="w_class_send").click())
    assert {r["answer"]: r["count"] for r in rows(made) if r["step"] == str(n)} == {"right": "2"}

    teacher.button(key="w_class_end").click()
    act(teacher, None)
    assert class_store().version(code) is None and "has ended" in texts(teacher)
    kept = downloads[f"class-results-{lesson.id}.csv"]                        # after End class: what it was
    assert {r["answer"]: r["count"] for r in rows(kept) if r["step"] == str(n)} == {"right": "2"}
    assert not any(secret in str(v) or code in str(v) for v in (rows(kept), teacher.query_params))
    act(teacher, teacher.button(key="w_class_ended_close").click())
    assert "_class_ended" not in teacher.session_state


def test_a_following_student_sees_the_teachers_view_without_the_controls_that_lead_elsewhere():
    """While following: no example picker, model picker, share link, arrow keys or Start a class (the teacher leads;
    the layer and head sliders and the text stay, showing the teacher's); Explore on my own brings them back."""
    teacher, code, _secret = start_class()
    for present in ("0", "1"):
        student = open_page("attention", present=present, **{JOIN: codes.shown(code)})
        for following in (True, False):
            shown = widget_values(student)
            assert {"layer", "head"} <= set(shown), present
            leads = {"w_example" in shown, "w_model" in shown, "presenter_keys" in student.session_state,
                     any("[[steps]]" in c.value for c in student.code)}     # the share popover's lesson snippet
            assert leads == {not following}, (present, following)
            assert ("w_class_start" in {b.key for b in student.button}) == (present == "1" and not following)
            if following:
                act(student, student.button(key="w_class_detach").click())


def test_a_following_students_live_train_view_polls_less_often_than_the_teachers(monkeypatch):
    """While a run trains, the Train page's live view reruns on a timer (st.fragment's run_every): the teacher's
    every POLL_S, a following student's every FOLLOWER_POLL_S (sixty followers at the teacher's rate would ask for
    150 runs a second); a student exploring on their own polls as anyone does."""
    import streamlit

    from app_core.scheduling import FOLLOWER_POLL_S
    from app_pages.train.page import POLL_S

    polls, fragment = [], streamlit.fragment

    def recording_fragment(func=None, *, run_every=None):
        if run_every is not None:
            polls.append(run_every)
        return fragment(func, run_every=run_every)
    monkeypatch.setattr(streamlit, "fragment", recording_fragment)
    teacher = open_page("train", present="1", steps="3000", seed="12")
    act(teacher, teacher.button(key="w_class_start").click())
    code, _ = teacher.session_state["_class_teaching"]
    assert polls and set(polls) == {POLL_S} and FOLLOWER_POLL_S > POLL_S
    polls.clear()
    student = open_page("attention", **{JOIN: code})
    assert student.session_state["_run"][0] == "train" and set(polls) == {FOLLOWER_POLL_S}
    polls.clear()
    act(student, student.button(key="w_class_detach").click())
    assert set(polls) == {POLL_S}
