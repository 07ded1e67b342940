"""End-to-end, the Circuits page at 1024x768 (a projector) in English and Chinese: no error, the main chart's top on
the first screen, and switching the view (its tabs) redraws the main chart with the other view's figure. The numbers
themselves are tests/app/test_circuits_page.py's."""
from __future__ import annotations

import pytest

from tests.e2e.test_browser import (
    PROJECTOR,
    assert_no_exception,
    box,
    copy_out,
    digest,
    open_view,
    query,
    rerun,
    save_screenshots,
    url_of,
)

CHART = '[data-testid="stMain"] [data-testid="stPlotlyChart"]'
TABS = '[data-testid="stMain"] [role="tab"]'
OTHER_VIEW = ("attribution", 2)         # the view switched to, and its tab's place (the first is the head roles)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_circuits_page_first_screen_and_view_switch(app_url, new_page, screenshot_dir, lang):
    width, height = PROJECTOR
    page = new_page(width, height)
    open_view(page, url_of(app_url, "/circuits", lang=lang))
    assert_no_exception(page, f"Circuits ({lang})")
    chart = box(page, CHART)
    assert chart is not None and 0 <= chart["top"] < height, f"the main chart is not on the first screen: {chart}"
    before = digest(page)
    shots = save_screenshots(page, f"circuits_{lang}_{width}x{height}", screenshot_dir, scroll=False)

    view, index = OTHER_VIEW
    rerun(page, lambda: page.locator(TABS).nth(index).click())
    assert_no_exception(page, f"Circuits ({lang}), view {view}")
    assert query(page.url).get("view") == view, page.url
    after = digest(page)
    assert after is not None and after != before, f"the main chart did not change: {before} then {after}"
    copy_out(shots + save_screenshots(page, f"circuits_{lang}_{view}_{width}x{height}", screenshot_dir, scroll=False))
