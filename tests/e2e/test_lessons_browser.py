"""End-to-end, lessons in presenter mode at 1024x768 (a projector), in English and Chinese: a lesson link opens its
step, PageDown / PageUp (what presentation clickers send) move through every step, and at each one the step's frame
(text, step n of N, Previous / Next) is whole on the first screen with the top of the view's main chart and a good
part of it. Screenshots of every step (pytest's temp dir, and $E2E_SCREENSHOT_DIR)."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright import sync_api

from app_core.lessons import load_catalog
from tests.e2e.browser_harness import IDLE_WITH_CHARTS_JS
from tests.e2e.test_browser import (
    PROJECTOR,
    box,
    copy_out,
    exception_text,
    open_view,
    query,
    save_screenshots,
    url_of,
)

LESSONS = load_catalog().lessons
# Of the main chart (all of a shorter one) on the first screen below the step's text. The Inside page's block walk
# starts its first chart ~480 px below the presenter row (tabs, token slider, the steps' list, the step's header):
# there the frame leaves ~100-130 px of it at 1024x768.
MIN_SHARED_CHART_PX = 100
PANEL = ".st-key-lesson_panel"
CHART = '[data-testid="stMain"] [data-testid="stPlotlyChart"]'
STEP_IS_JS = "(step) => new URLSearchParams(location.search).get('step') === step"
# Idle (charts drawn) for `ms` without a break: a Train step's runs have finished (its page polls until they have).
QUIET_JS = ("(ms) => { const now = Date.now(); if (!(" + IDLE_WITH_CHARTS_JS + ")(1)) { window.__busyAt = now; "
            "return false; } if (window.__busyAt === undefined) window.__busyAt = now; "
            "return now - window.__busyAt > ms; }")
QUIET_MS = 4_000
PRESS_MS = 30_000
SETTLE_MS = 240_000             # the Train steps' runs go on training in the background and slow the next view


def press(page, key: str, step: int) -> None:
    """A key press (the focus on the page, not in a field) until the link names `step`, then the app idle with its
    charts drawn. Pressed again once if the first press fell into a Train page's polling run and was lost."""
    for attempt in (1, 2):
        page.locator("body").press(key)
        try:
            page.wait_for_function(STEP_IS_JS, arg=str(step), timeout=PRESS_MS * attempt, polling=100)
            break
        except sync_api.TimeoutError:
            if attempt == 2:
                raise
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=1, timeout=SETTLE_MS, polling=100)


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
def test_every_step_in_presenter_mode_at_1024x768(app_url, new_page, screenshot_dir, lang):
    width, height = PROJECTOR
    page = new_page(width, height)
    problems: list[str] = []
    shots: list[Path] = []
    try:
        for lesson in LESSONS:
            try:
                open_view(page, url_of(app_url, "/lessons", lesson=lesson.id, step="1", present="1", lang=lang))
                for n in range(1, len(lesson.steps) + 1):
                    if n > 1:
                        press(page, "PageDown", n)
                    link = query(page.url)
                    where = f"{lesson.id} step {n} ({lang})"
                    if (link.get("lesson"), link.get("step"), link.get("present")) != (lesson.id, str(n), "1"):
                        problems.append(f"{where}: the link is {page.url}")
                    problems += first_screen_problems(page, where, width, height)
                    shots += save_screenshots(page, f"lesson_{lang}_{lesson.id}_{n:02d}", screenshot_dir,
                                              scroll=False)
                    if lesson.step(n).page == "train":      # as a class would: watch the runs end, then move on
                        page.evaluate("delete window.__busyAt")
                        page.wait_for_function(QUIET_JS, arg=QUIET_MS, timeout=SETTLE_MS, polling=100)
                press(page, "PageUp", len(lesson.steps) - 1)          # raises if it does not go back a step
            except sync_api.TimeoutError as err:
                problems.append(f"{lesson.id} ({lang}): {str(err).splitlines()[0]} at {page.url}")
    finally:
        copy_out(shots)
    assert not problems, "\n".join(problems)
