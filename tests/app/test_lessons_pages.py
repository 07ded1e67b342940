"""Lessons in AppTest: every step of every built-in lesson opens in both languages with its view's chart, a link
restores lesson and step (and what the student changed), back-to-this-step's-view, questions with reveal and score,
the Lessons page with a broken teacher's file listed, and the snippet a view gives."""
from __future__ import annotations

import pytest

from app_core.lessons import load_catalog
from app_core.lessons.loading import ENV_DIR
from app_pages._widgets import escape_markdown
from tests.app.apptest import figures, open_page, rerun, run_until, warnings

LESSONS = load_catalog().lessons
ACTIVE = "_lesson"


def panel_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def step_words(text: str) -> str:
    """The first words of a step's text, as the panel's Markdown shows them (no formula)."""
    return text.split("$")[0].split("\n")[0][:24]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.id for lesson in LESSONS])
def test_every_step_opens_with_its_view_s_chart(lesson, lang):
    at = open_page("lessons", lesson=lesson.id, step="1", lang=lang)
    for n, step in enumerate(lesson.steps, start=1):
        if n > 1 and lang == "zh":
            # AppTest cannot rerun a tree holding a select_slider with translated labels (Parameters, Train: it
            # formats their values with str): in Chinese each step opens from its link, in English by Next
            at = open_page("lessons", lesson=lesson.id, step=str(n), lang=lang)
        elif n > 1:
            at.button(key="w_lesson_next").click()
            rerun(at)
        assert at.session_state[ACTIVE] == (lesson.id, n)
        assert dict(at.query_params)["lesson"] == lesson.id and dict(at.query_params)["step"] == str(n)
        shown = panel_text(at)
        assert step_words(step.text[lang]) in shown, (n, step.text[lang][:40])
        total = len(lesson.steps)
        assert (f"Step {n} of {total}" if lang == "en" else f"第 {n} 步，共 {total} 步") in shown
        if step.page == "train":                    # its charts come with the training job's first numbers
            run_until(at, figures)
        assert figures(at), f"step {n} ({step.page}) shows no chart"
    assert at.button(key="w_lesson_next").disabled


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
    assert at.session_state[ACTIVE] == ("1-llm-basics", 13) and at.session_state["params_preset"] == "Qwen3-8B"
    bad = open_page("attention", lesson="no-such-lesson", step="2", layer="4")
    assert ACTIVE not in bad.session_state and bad.session_state["layer"] == 4
    assert "lesson='no-such-lesson' is not a lesson of this app" in warnings(bad)


def test_questions_reveal_and_keep_the_score():
    at = open_page("parameters", lesson="1-llm-basics", step="13")
    widget = "lesson_answer_1-llm-basics_13"
    at.text_input(key=widget).set_value("8.0B")
    at.button(key="w_lesson_check_13").click()
    rerun(at)
    assert "Not quite" in panel_text(at)
    at.text_input(key=widget).set_value("8,190,735,360")
    at.button(key="w_lesson_check_13").click()
    rerun(at)
    assert "Right!" in panel_text(at) and "Your score: 0 of 1" in "\n".join(c.value for c in at.caption)
    at.button(key="w_lesson_reveal_13").click()
    rerun(at)
    assert "Answer: 8,190,735,360" in "\n".join(s.value for s in at.success)
    at.button(key="w_lesson_prev").click()          # step 12: the MLP (no question) on the Inside page
    rerun(at)
    at.button(key="w_lesson_prev").click()          # step 11: causal mask
    rerun(at)
    at.button(key="w_lesson_prev").click()          # step 10: attention, no question
    rerun(at)
    at.button(key="w_lesson_prev").click()          # step 9: softmax with its question
    rerun(at)
    at.text_input(key="lesson_answer_1-llm-basics_9").set_value("0.87")
    at.button(key="w_lesson_check_9").click()
    rerun(at)
    assert "Your score: 1 of 2" in "\n".join(c.value for c in at.caption)


def test_a_computed_answer_follows_the_text_in_use(lm):
    text = "Sequence: lantern cobalt fjord. Again: lantern cobalt"
    at = open_page("attention", lesson="3-architecture-training", step="12", text=text)
    at.button(key="w_lesson_reveal_12").click()
    rerun(at)
    import numpy as np

    expected = lm.token_strings([int(np.argmax(lm.run(text).next_token_logits))])[0]
    assert f"Answer: {expected}" in "\n".join(s.value for s in at.success)


def test_presenter_mode_moves_with_page_down_and_page_up():
    at = open_page("attention", lesson="2-attention-maths", step="2", present="1")
    assert at.button(key="w_lesson_next").proto.shortcut.lower() == "pagedown"
    assert at.button(key="w_lesson_prev").proto.shortcut.lower() == "pageup"
    plain = open_page("attention", lesson="2-attention-maths", step="2")
    assert not plain.button(key="w_lesson_next").proto.shortcut


def test_the_lessons_page_lists_lessons_and_broken_files(tmp_path, monkeypatch):
    (tmp_path / "typo.toml").write_text('title.en = "x"\n[[steps]]\npage = "attention"\nsettings = { lyer = 2 }\n',
                                        encoding="utf-8")
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    at = open_page("lessons", lang="zh")
    shown = panel_text(at)
    for lesson in LESSONS:
        assert escape_markdown(lesson.title["zh"]) in shown
    errors = "\n".join(e.value for e in at.error)
    assert "**typo\\.toml**: title 缺少 zh 文本。" in errors
    at.button(key="w_lesson_start_4-architecture-improvements").click()
    rerun(at)
    assert at.session_state[ACTIVE] == ("4-architecture-improvements", 1)
    assert at.session_state["params_preset"] == "GPT-2 small" and figures(at)


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
