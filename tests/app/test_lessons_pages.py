"""Lessons in AppTest: every step of every built-in lesson opened by its link in both languages (its page and
settings, its text with the model's facts, "step n of N", a held view until the answer is revealed, its chart, every
Reveal, Next and Previous), a link restores lesson and step (and what the student changed), back-to-this-step's-view,
questions with check, reveal and score, point and task questions, the Lessons page with broken teachers' files
listed, and the snippet a view gives.

AppTest formats a widget's options outside the script run (Selectbox.index calls its format_func there), where the
app's language is the default, English: on a Chinese page whose selectbox labels are translated every rerun failed
("'learned' is not in list"). A browser sends the label the page showed and the server reads it inside the run, in
the session's language: AppTest only. The walk sets the default language to the page's (in_language)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app_core.lessons import load_catalog
from app_core.lessons.facts import fill, model_facts
from app_core.lessons.loading import ENV_DIR
from app_core.lessons.views import step_settings
from app_core.link import Context
from app_pages.frame import i18n
from app_pages.frame.widgets import escape_markdown
from harness.apptest import array, figures, open_page, rerun, run_until, warnings

LESSONS = load_catalog().lessons
ACTIVE = "_lesson"
HELD = {"en": "Predict first.", "zh": "先预测。"}


@pytest.fixture
def in_language(monkeypatch):
    """Sets the language AppTest formats widget options in (outside a script run) to the page's."""
    return lambda lang: monkeypatch.setattr(i18n, "DEFAULT", lang)


@pytest.fixture(scope="module")
def facts(lm):
    return model_facts(lm.config)


def panel_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def step_words(text: str) -> str:
    """The first words of a step's text, as the panel's Markdown shows them (no formula)."""
    return text.split("$")[0].split("\n")[0][:24]


def indicator(n: int, total: int, lang: str) -> str:
    return f"Step {n} of {total}" if lang == "en" else f"第 {n} 步，共 {total} 步"


def is_held(at, lang: str) -> bool:
    return any(HELD[lang] in i.value for i in at.info)


def check_step(at, lesson, n: int, lang: str, facts: dict) -> None:
    """The session is on step n: its page and settings, its link, its text and indicator."""
    step = lesson.step(n)
    assert at.session_state[ACTIVE] == (lesson.id, n)
    link = dict(at.query_params)
    assert (link["lesson"], link["step"]) == (lesson.id, str(n)), link
    assert at.session_state["_run"][0] == step.page
    ctx = Context(n_layers=30, n_heads=9, head_dim=64, vocab_size=49152, n_tokens=None)
    for key, value in step_settings(step, ctx)[0].items():
        assert at.session_state[key] == value, (n, key)
    shown = panel_text(at)
    assert step_words(fill(step.text[lang], facts)) in shown, (n, step.text[lang][:40])
    assert "{" + "n_" not in shown
    assert indicator(n, len(lesson.steps), lang) in shown


def has_chart(at, step) -> bool:
    if step.page == "train":                    # its charts come with the training job's first numbers
        run_until(at, figures)
    return bool(figures(at))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.id for lesson in LESSONS])
def test_every_step_opens_by_its_link_with_its_view(lesson, lang, facts, in_language):
    in_language(lang)
    total = len(lesson.steps)
    for n, step in enumerate(lesson.steps, start=1):
        at = open_page("lessons", lesson=lesson.id, step=str(n), lang=lang)
        check_step(at, lesson, n, lang, facts)
        assert is_held(at, lang) == step.predict, n
        if step.predict:
            assert not figures(at), f"step {n}: the chart shows before the answer"
        if step.question is not None:
            at.button(key=f"w_lesson_reveal_{n}").click()
            rerun(at)
            assert not is_held(at, lang)
            why = fill(step.question.why[lang], facts).split("{answer}")[0].split("$")[0][:16]
            assert why in panel_text(at), (n, why)
            if step.question.kind != "task":
                assert at.success and at.success[0].value.startswith("Answer: " if lang == "en" else "答案：")
        assert has_chart(at, step), f"step {n} ({step.page}) shows no chart"
        next_button = at.button(key="w_lesson_next")
        assert next_button.disabled == (n == total) and at.button(key="w_lesson_prev").disabled == (n == 1)
        if n < total:
            next_button.click()
            rerun(at)
            check_step(at, lesson, n + 1, lang, facts)
    at.button(key="w_lesson_prev").click()
    rerun(at)
    check_step(at, lesson, total - 1, lang, facts)


def test_a_link_restores_lesson_step_and_what_the_student_changed():
    at = open_page("attention", lesson="2-attention-maths", step="4")
    assert at.session_state[ACTIVE] == ("2-attention-maths", 4)
    assert at.session_state["attention_view"] == "layer" and at.session_state["layer"] == 3
    at.slider(key="layer").set_value(7)
    rerun(at)
    link = dict(at.query_params)
    assert (link["lesson"], link["step"], link["layer"]) == ("2-attention-maths", "4", "7")
    again = open_page("attention", **link)
    assert again.session_state[ACTIVE] == ("2-attention-maths", 4) and again.session_state["layer"] == 7
    again.button(key="w_lesson_back").click()                      # back to this step's view
    rerun(again)
    assert again.session_state["layer"] == 3 and again.session_state["attention_view"] == "layer"
    again.button(key="w_lesson_prev").click()
    rerun(again)
    assert again.session_state[ACTIVE] == ("2-attention-maths", 3) and dict(again.query_params)["step"] == "3"
    assert again.session_state["softmax_source"] == "attention"


def test_a_step_on_another_page_and_a_bad_lesson_link():
    at = open_page("parameters", lesson="1-llm-basics", step="99")       # clamped to the last step
    assert at.session_state[ACTIVE] == ("1-llm-basics", 15) and at.session_state["params_preset"] == "Qwen3-8B"
    bad = open_page("attention", lesson="no-such-lesson", step="2", layer="4")
    assert ACTIVE not in bad.session_state and bad.session_state["layer"] == 4
    assert "lesson='no-such-lesson' is not a lesson of this app" in warnings(bad)


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def test_questions_reveal_and_keep_the_score():
    at = open_page("parameters", lesson="1-llm-basics", step="15")
    assert is_held(at, "en") and not figures(at) and "8,190,735,360" not in panel_text(at) + captions(at)
    widget = "lesson_answer_1-llm-basics_15"
    at.text_input(key=widget).set_value("7.0B")
    at.button(key="w_lesson_check_15").click()
    rerun(at)
    assert "Not quite" in panel_text(at) and not is_held(at, "en") and figures(at)    # checked: the view opens
    at.text_input(key=widget).set_value("8.1B")                                       # a prediction: within 3%
    at.button(key="w_lesson_check_15").click()
    rerun(at)
    assert "Right!" in panel_text(at) and "Your score: 0 of 1" in captions(at)       # the first check counts
    at.button(key="w_lesson_reveal_15").click()
    rerun(at)
    assert "Answer: 8,190,735,360" in "\n".join(s.value for s in at.success)
    for _ in range(4):                              # back to step 11: the stable softmax, with its question
        at.button(key="w_lesson_prev").click()
        rerun(at)
    assert at.session_state[ACTIVE] == ("1-llm-basics", 11)
    at.text_input(key="lesson_answer_1-llm-basics_11").set_value("0.665")
    at.button(key="w_lesson_check_11").click()
    rerun(at)
    assert "Your score: 1 of 2" in captions(at)


def test_a_held_view_hides_the_token_count_until_the_answer_is_checked():
    at = open_page("inside", lesson="1-llm-basics", step="1")
    assert is_held(at, "en") and "/ 512 tokens" not in captions(at) and not figures(at)
    at.text_input(key="lesson_answer_1-llm-basics_1").set_value("")                  # an empty answer: not checked
    at.button(key="w_lesson_check_1").click()
    rerun(at)
    assert is_held(at, "en") and not at.session_state.get("_lesson_results")
    at.text_input(key="lesson_answer_1-llm-basics_1").set_value("11")
    at.button(key="w_lesson_check_1").click()
    rerun(at)
    assert "Right!" in panel_text(at) and "11 / 512 tokens" in captions(at) and figures(at)


def test_a_point_question_is_answered_by_clicking_a_token():
    at = open_page("attention", lesson="2-attention-maths", step="1")
    strip = at.pills(key="lesson_answer_2-attention-maths_1")
    assert strip.options[:3] == ["The", "␣keys", "␣that"]
    strip.set_value(22)                                                     # "them" itself: wrong
    at.button(key="w_lesson_check_1").click()
    rerun(at)
    assert "Not quite" in panel_text(at) and figures(at)
    at.pills(key="lesson_answer_2-attention-maths_1").set_value(1)          # "keys"
    at.button(key="w_lesson_check_1").click()
    rerun(at)
    assert "Right!" in panel_text(at) and at.session_state["_lesson_results"] == {("2-attention-maths", 1): False}


def test_a_task_runs_the_model_on_the_student_s_text(in_language):
    in_language("zh")
    at = open_page("inside", lesson="1-llm-basics", step="2", lang="zh")
    widget = "lesson_answer_1-llm-basics_2"
    at.text_area(key=widget).set_value("模型并不直接读文字")
    at.button(key="w_lesson_check_2").click()
    rerun(at)
    assert "9 个字符，13 个词元。" in captions(at) and "Right!" not in panel_text(at)
    at.text_area(key=widget).set_value("这是中文数字")
    at.button(key="w_lesson_check_2").click()
    rerun(at)
    assert "6 个字符，6 个词元。" in captions(at) and at.session_state["lesson_answer_1-llm-basics_2_result"]


def test_a_class_follower_is_held_on_the_teacher_s_predict_step_until_it_is_revealed():
    """The contract the live class wires (the class panel sets CLASS_HOLD for a follower, whose own lesson is not
    active): held on that step's page only, until the step is revealed or the follower has answered it."""
    at = open_page("attention", view="query", layer="13", head="8")
    at.session_state["_lesson_class_hold"] = ("2-attention-maths", 1)
    rerun(at)
    assert is_held(at, "en") and not figures(at) and ACTIVE not in at.session_state
    at.session_state["_lesson_answered"] = {("2-attention-maths", 1)}
    rerun(at)
    assert not is_held(at, "en") and figures(at)
    at.session_state["_lesson_answered"] = set()
    at.session_state["_lesson_revealed"] = {("2-attention-maths", 1)}
    rerun(at)
    assert not is_held(at, "en")
    other = open_page("softmax")
    other.session_state["_lesson_class_hold"] = ("2-attention-maths", 1)     # a step of another page: not held
    rerun(other)
    assert not is_held(other, "en") and figures(other)


def test_a_computed_answer_follows_the_text_in_use(lm):
    import numpy as np

    text = "Sequence: lantern cobalt fjord. Again: lantern cobalt"
    at = open_page("generate", lesson="3-architecture-training", step="13")
    at.text_area(key="text").set_value(text)
    rerun(at)
    at.button(key="w_lesson_reveal_13").click()
    rerun(at)
    logits = lm.run(text).next_token_logits
    words = [lm.decode([int(i)]) for i in np.argsort(-logits)[:20]]
    expected = next(w for w in words if w.strip() and "\ufffd" not in w)
    assert f"Answer: {escape_markdown(expected.replace(' ', '␣'))}" in "\n".join(s.value for s in at.success)


def keys_handled(at) -> dict:
    """What the presenter keys' handler was given: {key: [value name, step]} (app_pages/frame/presenter_keys.py)."""
    found = [json.loads(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name ==
             "atlas_presenter_keys"]
    return found[0]["keys"] if found else {}


def test_presenter_mode_moves_with_page_down_and_page_up():
    """In presenter mode PageDown / PageUp step the lesson (a clicker's keys), within its steps; the arrows still step
    the layer and the head. A plain page leaves PageUp / PageDown to the browser."""
    at = open_page("attention", lesson="2-attention-maths", step="2", present="1")
    keys = keys_handled(at)
    assert keys["PageDown"] == ["lesson step", 1] and keys["PageUp"] == ["lesson step", -1]
    assert keys["ArrowUp"] == ["layer", 1]
    steps = len(next(lesson for lesson in LESSONS if lesson.id == "2-attention-maths").steps)
    assert json.loads(at.get("bidi_component")[0].proto.json)["limits"]["lesson step"] == [1, steps]
    plain = open_page("attention", lesson="2-attention-maths", step="2")
    assert "PageDown" not in keys_handled(plain) and "ArrowUp" in keys_handled(plain)


def test_the_lessons_page_lists_lessons_and_broken_files(tmp_path, monkeypatch, in_language):
    (tmp_path / "typo.toml").write_text('title.en = "x"\n[[steps]]\npage = "attention"\nsettings = { lyer = 2 }\n',
                                        encoding="utf-8")
    (tmp_path / "deep.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    (tmp_path / "long.toml").write_text("order = " + "7" * 5_000 + "\n", encoding="utf-8")
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    in_language("zh")
    at = open_page("lessons", lang="zh")
    shown = panel_text(at)
    for lesson in LESSONS:
        assert escape_markdown(lesson.title["zh"]) in shown
    errors = "\n".join(e.value for e in at.error)
    assert "**typo\\.toml**: title 缺少 zh 文本。" in errors
    assert "**deep\\.toml**: 文件里的表或数组嵌套太深，无法读取。" in errors
    assert "**long\\.toml**: " in errors and "ValueError" in errors
    at.button(key="w_lesson_start_4-architecture-improvements").click()
    rerun(at)
    assert at.session_state[ACTIVE] == ("4-architecture-improvements", 1)
    assert at.session_state["params_preset"] == "GPT-2 small" and is_held(at, "zh")


def test_the_share_box_gives_the_view_as_a_lesson_step():
    at = open_page("causal-mask", layer="5", head="2", n="6")
    snippet = "\n".join(c.value for c in at.code if c.language == "toml")
    assert 'page = "causal-mask"' in snippet and "layer = 5, head = 2, n = 6" in snippet


def test_generate_s_own_step_is_not_read_as_the_lesson_s(tmp_path, monkeypatch):
    (tmp_path / "gen.toml").write_text('''title = { en = "G", zh = "生" }
summary = { en = "G", zh = "生" }
[[steps]]
page = "generate"
settings = { n = 4, greedy = true, step = 2 }
text = { en = "One", zh = "一" }
[[steps]]
page = "generate"
settings = { n = 4, greedy = true }
text = { en = "Two", zh = "二" }
''', encoding="utf-8")
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    at = open_page("generate", lesson="gen", step="1")
    assert at.session_state[ACTIVE] == ("gen", 1) and at.session_state["gen_step"] == 2
    at.button(key="w_lesson_next").click()
    rerun(at)
    assert at.session_state[ACTIVE] == ("gen", 2) and at.session_state.get("gen_step") is None
    assert dict(at.query_params)["step"] == "2"


def test_the_mask_comparison_step_s_answer_is_what_its_two_maps_show():
    lesson = next(lesson for lesson in LESSONS if lesson.id == "2-attention-maths")
    n = next(i for i, step in enumerate(lesson.steps, start=1) if step.settings.get("view") == "compare")
    at = open_page("causal-mask", lesson=lesson.id, step=str(n))
    assert is_held(at, "en") and not figures(at)
    at.radio(key=f"lesson_answer_{lesson.id}_{n}").set_value(lesson.step(n).question.answer)
    at.button(key=f"w_lesson_check_{n}").click()
    rerun(at)
    assert "Right!" in panel_text(at)
    masked, unmasked = (array(f["data"][0]["z"]) for f in figures(at)[:2])
    assert masked.shape == unmasked.shape == (10, 10)
    assert not np.nan_to_num(np.triu(masked, 1)).any()                     # the decoder: nothing above the diagonal
    assert (np.triu(unmasked, 1) > 0.01).sum() >= 15                        # the encoder: a third of them and more
