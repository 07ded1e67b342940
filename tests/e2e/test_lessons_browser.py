"""End-to-end, lessons in presenter mode at 1024x768 (a projector), in English and Chinese: a lesson link opens its
step, PageDown / PageUp (what presentation clickers send) move between steps, and at each step walked the step's frame
(text, step n of N, Previous / Next) is whole on the first screen with the top of the view's main chart and a good
part of it. Screenshots of every step walked (pytest's temp dir, and $E2E_SCREENSHOT_DIR).

The browser walks a sample of the steps (tests/app/test_lessons_pages.py opens every step of every lesson in both
languages in AppTest): for each kind of view the lessons use (a page and its view, the Softmax page's source, the
Train page with or without a comparison), the step whose text takes the most room in that language (most lines, then
most characters): the frame's height is its text's, so that step leaves the least room for the chart. Chosen from the
lesson files, so a new lesson or step joins the sample when it is the new worst case of its kind. A predict step's
view opens once its answer is revealed (the Reveal button on the frame): the frame and chart are checked then.

The new kinds of question in one browser, no class: a predict step's view held until the answer is checked, a point
question answered by clicking a token, a task checked by running the model on the student's text.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright import sync_api

from app_core import schemas as S
from app_core.lessons import load_catalog
from app_pages.navigation import url_path
from harness.browser import IDLE_WITH_CHARTS_JS, visit
from tests.e2e.test_browser import (
    PROJECTOR,
    WIDE,
    assert_no_exception,
    box,
    copy_out,
    exception_text,
    open_view,
    query,
    rerun,
    save_screenshots,
    url_of,
)

LESSONS = load_catalog().lessons
# The settings that choose what a page shows below the frame (with the page, a step's kind of view): their values, and
# for the Train page's comparison whether there is one.
VIEW_SETTINGS = ("view", "source")
COMPARISON = "cmp"
# Of the main chart (all of a shorter one) on the first screen below the step's text. The Inside page's block walk
# starts its first chart ~480 px below the presenter row (tabs, token slider, the steps' list, the step's header):
# there the frame leaves ~100-130 px of it at 1024x768.
MIN_SHARED_CHART_PX = 100
PANEL = ".st-key-lesson_panel"
CHART = '[data-testid="stMain"] [data-testid="stPlotlyChart"]'
# The address names the step and its page: a step on another page writes its link before the switch to that page (the
# old page's charts are still there and the app is idle between the two runs).
STEP_IS_JS = ("([step, path]) => new URLSearchParams(location.search).get('step') === step"
              " && location.pathname.replace(/^\\/+|\\/+$/g, '') === path")
# A Train step's page is live: a run has passed its first log point (its progress bar moved; the page polls).
TRAINING_JS = ("() => [...document.querySelectorAll('[data-testid=\"stProgress\"] [role=\"progressbar\"]')]"
               ".some(bar => Number(bar.getAttribute('aria-valuenow')) > 0)")
PRESS_MS = 30_000
SETTLE_MS = 240_000             # a Train step's runs go on training until no page has polled them for 10 s


def view_kind(step) -> tuple:
    """The step's page and what its settings in VIEW_SETTINGS and COMPARISON choose (a default one as its default)."""
    schema = S.schema(step.page)

    def value(name: str):
        param = schema.by_name(name)
        return None if param is None else step.settings.get(name, param.default)

    comparison = value(COMPARISON)
    return (step.page, *(value(name) for name in VIEW_SETTINGS),
            None if comparison is None else comparison != schema.by_name(COMPARISON).default)


def room_taken(text: str) -> tuple[int, int]:
    """How much of the screen a step's text takes: its lines (the lesson files break them), then its characters."""
    return text.count("\n") + 1, len(text)


def sample(lang: str) -> list[tuple]:
    """The steps the browser walks in `lang`, in the lessons' order: (lesson, n) for each kind of view, the one whose
    text takes the most room; and the step after the first of them when no two are neighbours (PageDown is pressed
    between neighbours, any other step is opened by its link)."""
    worst: dict[tuple, tuple] = {}
    for i, lesson in enumerate(LESSONS):
        for n, step in enumerate(lesson.steps, start=1):
            kind, room = view_kind(step), room_taken(step.text[lang])
            if kind not in worst or room > worst[kind][0]:
                worst[kind] = (room, i, n)
    picked = sorted({(i, n) for _, i, n in worst.values()})
    if not any((i, n + 1) in picked for i, n in picked):
        i, n = next((i, n) for i, n in picked if n < len(LESSONS[i].steps))
        picked = sorted({*picked, (i, n + 1)})
    return [(LESSONS[i], n) for i, n in picked]


def open_step(page, url: str, step) -> None:
    """Open a lesson link (harness.browser.visit: by the tab's history once it shows the app): wait for the step's
    frame, then for the app idle with its charts (none while a predict step holds its view)."""
    visit(page, url, min_charts=0)
    page.wait_for_function(STEP_IS_JS, arg=[query(url)["step"], url_path(step.page)], timeout=SETTLE_MS, polling=100)
    page.locator(PANEL).wait_for(state="visible", timeout=SETTLE_MS)
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=0 if step.predict else 1, timeout=SETTLE_MS, polling=100)


def reveal_if_held(page, step, n: int) -> None:
    """On a predict step, reveal the answer (the view is held until then) and wait for its charts."""
    if step.predict:
        assert page.locator(CHART).count() == 0, "a predict step shows its chart before the answer"
        rerun(page, lambda: page.locator(f".st-key-w_lesson_reveal_{n} button").click())


def press(page, key: str, lesson, n: int, times: int = 1) -> None:
    """A key pressed `times` times 30 ms apart (the focus on the page, not in a field), then the address names step
    n and its page and the app is idle with its charts drawn (none while a predict step holds its view). No press is
    lost, even one that falls into a Train page's polling run (app_pages/frame/presenter_keys.py)."""
    for _ in range(times):
        page.locator("body").press(key)
        page.wait_for_timeout(30)
    step = lesson.step(n)
    page.wait_for_function(STEP_IS_JS, arg=[str(n), url_path(step.page)], timeout=2 * PRESS_MS, polling=100)
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=0 if step.predict else 1, timeout=SETTLE_MS, polling=100)


def first_screen_problems(page, where: str, width: int, height: int) -> list[str]:
    problems = []
    shown = exception_text(page)
    if shown:
        problems.append(f"{where}: the app shows an error: {shown[:400]}")
    panel, chart = box(page, PANEL), box(page, CHART)
    if panel is None or panel["top"] < 0 or panel["bottom"] > height or panel["right"] > width:
        problems.append(f"{where}: the step's frame is not whole on the first screen: {panel}")
    seen = 0 if chart is None or not 0 <= chart["top"] < height else min(chart["bottom"], height) - chart["top"]
    wanted = MIN_SHARED_CHART_PX if chart is None else min(MIN_SHARED_CHART_PX, chart["bottom"] - chart["top"])
    if seen < wanted:
        problems.append(f"{where}: {seen:.0f} px of the main chart on the first screen (wanted {wanted:.0f}): "
                        f"frame {panel}, chart {chart}")
    return problems


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sampled_steps_in_presenter_mode_at_1024x768(app_url, new_page, screenshot_dir, lang):
    width, height = PROJECTOR
    page = new_page(width, height)
    problems: list[str] = []
    shots: list[Path] = []
    walked = sample(lang)
    pressed = False
    try:
        before = None
        for lesson, n in walked:
            where = f"{lesson.id} step {n} ({lang})"
            try:
                if before == (lesson.id, n - 1):
                    press(page, "PageDown", lesson, n)
                    pressed = True
                else:
                    open_step(page, url_of(app_url, "/lessons", lesson=lesson.id, step=str(n), present="1", lang=lang),
                              lesson.step(n))
                reveal_if_held(page, lesson.step(n), n)
                before = (lesson.id, n)
                link = query(page.url)
                if (link.get("lesson"), link.get("step"), link.get("present")) != (lesson.id, str(n), "1"):
                    problems.append(f"{where}: the link is {page.url}")
                if not lesson.step(n).predict:          # a step's chart can come a run after the last step's went
                    page.locator(CHART).first.wait_for(timeout=PRESS_MS)
                    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=1, timeout=SETTLE_MS, polling=100)   # and that
                    # run ended (a full run once measured no chart on the Efficient page's step just after one came)
                problems += first_screen_problems(page, where, width, height)
                shots += save_screenshots(page, f"lesson_{lang}_{lesson.id}_{n:02d}", screenshot_dir, scroll=False)
                if lesson.step(n).page == "train":      # its runs train live, then stop once no page polls them
                    page.wait_for_function(TRAINING_JS, timeout=SETTLE_MS, polling=100)     # (a PageDown next
                    # falls among the live view's timed reruns: server/streamlit_fixes.request_rerun)
            except sync_api.TimeoutError as err:
                before = None
                problems.append(f"{where}: {str(err).splitlines()[0]} at {page.url}")
        lesson, n = walked[-1]
        try:
            press(page, "PageUp", lesson, n - 1)     # raises if it does not go back
            for key, to in (("PageUp", n - 3), ("PageDown", n + 1)):          # two quick presses: two steps
                passed = range(min(to, n - 1), max(to, n - 1) + 1)
                if passed[0] >= 1 and passed[-1] <= len(lesson.steps) and not any(
                        lesson.step(k).page == "train" for k in passed):       # a Train step passed starts its runs
                    press(page, key, lesson, to, times=2)
                    break
        except sync_api.TimeoutError as err:
            problems.append(f"PageUp from {lesson.id} step {n} ({lang}): {str(err).splitlines()[0]} at {page.url}")
    finally:
        copy_out(shots)
    assert pressed, f"no two neighbouring steps in the sample {[(lesson.id, n) for lesson, n in walked]}"
    assert not problems, "\n".join(problems)


def test_predict_point_and_task_in_one_browser(app_url, new_page):
    page = new_page(*WIDE)
    open_step(page, url_of(app_url, "/", lesson="2-attention-maths", step="1"), LESSONS[1].step(1))
    assert page.locator(".st-key-lesson_predict").is_visible(), "the question is not on the frame"
    assert page.locator(CHART).count() == 0, "a predict step shows its chart before the answer"
    strip = "lesson_answer_2-attention-maths_1"
    rerun(page, lambda: page.locator(f".st-key-{strip} button[role='radio']").nth(1).click(), min_charts=0)  # "keys"
    assert page.locator(CHART).count() == 0
    rerun(page, lambda: page.locator(".st-key-w_lesson_check_1 button").click(), min_charts=1)
    assert page.get_by_text("Right!").first.is_visible() and page.locator(CHART).count() >= 1
    assert_no_exception(page, "point question")
    open_view(page, url_of(app_url, "/", lesson="1-llm-basics", step="2"))
    page.locator(".st-key-lesson_question button").first.click()          # a popover opens without a rerun
    area = page.locator(".st-key-lesson_answer_1-llm-basics_2 textarea")
    area.wait_for(state="visible")
    rerun(page, lambda: (area.fill("这是中文数字"), area.press("Control+Enter")))
    rerun(page, lambda: page.locator(".st-key-w_lesson_check_2 button").click())
    page.get_by_text("6 characters, 6 tokens.").first.wait_for(state="visible")
    assert page.get_by_text("Right!").first.is_visible()
    assert_no_exception(page, "task question")
