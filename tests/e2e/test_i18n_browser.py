"""End-to-end, in Chinese: every page and view with ?lang=zh at 1024x768 (a projector) keeps its main chart on the first
screen with the header (title, 中文 / English switch, share link, presenter switch) on one line and nothing cut; a
browser whose language is zh-CN opens the app in Chinese (navigation included); a link's lang wins over the browser's
language, and the switch writes it into the link. Screenshots of every view in Chinese (pytest's temp dir, and
$E2E_SCREENSHOT_DIR). Needs Debian's chromium and fonts-noto-cjk (Chinese glyphs)."""
from __future__ import annotations

import re
from pathlib import Path

from playwright import sync_api
from playwright.sync_api import expect

from harness.browser import RUN_COUNTER_INIT_JS, visit
from tests.e2e.test_browser import (
    MIN_CHART_PX,
    PROJECTOR,
    VIEWS,
    box,
    copy_out,
    exception_text,
    main_chart_box,
    open_view,
    query,
    rerun,
    save_screenshots,
    url_of,
)

HAN = re.compile(r"[\u4e00-\u9fff]")
# The header row: its title, then the switch, share link and presenter toggle, which must fit beside it unclipped.
HEADER_JS = """() => {
  const row = document.querySelector('.st-key-page_header');
  if (!row) return null;
  const r = row.getBoundingClientRect();
  const parts = [...row.querySelectorAll('h3, .st-key-w_lang button, [data-testid="stPopoverButton"], '
                                         + '[data-testid="stCheckbox"]')].map(e => {
    const b = e.getBoundingClientRect();
    const lines = new Set();                          // the title's text lines (by their top, to 10 px)
    const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n && e.tagName === 'H3'; n = walker.nextNode()) {
      if (!n.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) if (r.width) lines.add(Math.round(r.top / 10));
    }
    return {text: e.innerText.trim().slice(0, 40), left: b.left, right: b.right, top: b.top, bottom: b.bottom,
            lines: lines.size, clipped: e.scrollWidth > e.clientWidth + 1};
  }).filter(p => p.right > p.left);
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, parts};
}"""
NAV_JS = """() => [...document.querySelectorAll('[data-testid="stSidebarNav"] a, [data-testid="stTopNavLink"]')]
  .map(a => a.innerText.trim()).filter(Boolean)"""


def settled_header(page) -> dict | None:
    """HEADER_JS once the header's four parts are drawn (a widget's code can arrive after the run has ended, on a busy
    machine) and its layout has settled (two readings 150 ms apart agree); as it is after 10 s if a part is missing."""
    try:
        page.wait_for_function(f"() => ({HEADER_JS})()?.parts.length === 4", timeout=10_000, polling=100)
    except sync_api.TimeoutError:
        pass
    last = page.evaluate(HEADER_JS)
    for _ in range(20):
        page.wait_for_timeout(150)
        now = page.evaluate(HEADER_JS)
        if now == last:
            break
        last = now
    return last


def header_problems(page, where: str, width: int) -> list[str]:
    header = settled_header(page)
    if header is None:
        return [f"{where}: no page header"]
    problems = []
    title = page.locator(".st-key-page_header h3").inner_text()
    if not HAN.search(title):
        problems.append(f"{where}: the title is not Chinese: {title!r}")
    parts = sorted(header["parts"], key=lambda p: p["left"])
    if len(parts) != 4:
        problems.append(f"{where}: the header should show the title, the language button, the share link and the "
                        f"presenter switch: {parts}")
    for part, after in zip(parts, parts[1:] + [None], strict=True):
        middle = (part["top"] + part["bottom"]) / 2
        if part["clipped"] or part["right"] > width or not header["top"] <= middle <= header["bottom"]:
            problems.append(f"{where}: {part['text']!r} is cut or outside the header row: {part} in {header}")
        if after is not None and part["right"] > after["left"]:
            problems.append(f"{where}: {part['text']!r} overlaps {after['text']!r}")
    wrapped = [p for p in parts if p["lines"] > 1]
    if wrapped:
        problems.append(f"{where}: wraps onto more than one line: {wrapped}")
    return problems


def test_every_view_in_chinese_at_1024x768(app_url, new_page, screenshot_dir):
    """?lang=zh on every page and view: no error, the header in one row with a Chinese title and nothing cut, the main
    chart's top and 300 px of it on the first screen, the link keeps lang=zh. Screenshots."""
    width, height = PROJECTOR
    page = new_page(width, height)
    problems: list[str] = []
    shots: list[Path] = []
    try:
        for name, (path, _) in VIEWS.items():
            visit(page, url_of(app_url, path, lang="zh"))
            where = f"{name} ({path}) in Chinese"
            shown = exception_text(page)
            if shown:
                problems.append(f"{where}: the app shows an error: {shown[:500]}")
            problems += header_problems(page, where, width)
            chart, seen_instead = main_chart_box(page)
            seen = 0 if chart is None or not 0 <= chart["top"] < height else min(chart["bottom"], height) - chart["top"]
            wanted = MIN_CHART_PX if chart is None else min(MIN_CHART_PX, chart["bottom"] - chart["top"])
            if seen < wanted:
                problems.append(f"{where}: the main chart's top and {wanted} px of it should be on the first "
                                f"{height} px: {chart} {seen_instead}")
            if query(page.url).get("lang") != "zh":
                problems.append(f"{where}: the URL lost lang=zh: {page.url}")
            shots += save_screenshots(page, f"zh_{name}_{width}x{height}", screenshot_dir, scroll=False)
    finally:
        copy_out(shots)
    assert not problems, "\n".join(problems)


def test_presenter_mode_in_chinese(app_url, new_page, screenshot_dir):
    """Presenter mode in Chinese: the controls' row (text, layer, head, sink, share link, language, presenter) fits
    on the first screen of the Attention page. Screenshot."""
    width, height = PROJECTOR
    page = new_page(width, height)
    open_view(page, url_of(app_url, "/", lang="zh", present=1))
    row, switch = box(page, ".st-key-presenter_row"), box(page, ".st-key-presenter_row .st-key-present")
    assert row is not None and row["right"] <= width and row["bottom"] <= height, row
    assert switch is not None and switch["top"] < row["top"] + 40, f"the row wraps: {switch} in {row}"
    expect(page.locator(".st-key-present")).to_contain_text("演示", timeout=15_000)   # its label may draw later
    copy_out(save_screenshots(page, f"zh_presenter_{width}x{height}", screenshot_dir, scroll=False))


def test_a_chinese_browser_opens_in_chinese_and_the_link_decides(app_url, browser, screenshot_dir):
    """A browser whose language is zh-CN: navigation and page in Chinese, no lang in the link; the switch to English
    writes lang=en into the link, and that link opens in English in the same Chinese browser."""
    context = browser.new_context(viewport={"width": PROJECTOR[0], "height": PROJECTOR[1]}, locale="zh-CN")
    context.add_init_script(RUN_COUNTER_INIT_JS)
    try:
        page = context.new_page()
        open_view(page, app_url + "/causal-mask")
        assert "因果掩码" in page.locator(".st-key-page_header h3").inner_text()
        nav = " ".join(page.evaluate(NAV_JS))
        assert "注意力" in nav and "参数量" in nav and "Attention" not in nav, nav
        assert "lang" not in query(page.url)
        copy_out(save_screenshots(page, "zh_browser_locale", screenshot_dir, scroll=False))
        rerun(page, lambda: page.locator(".st-key-w_lang button", has_text="English").first.click())
        assert "Causal mask" in page.locator(".st-key-page_header h3").inner_text()
        assert query(page.url).get("lang") == "en", page.url
        fresh = context.new_page()
        open_view(fresh, page.url)
        assert "Causal mask" in fresh.locator(".st-key-page_header h3").inner_text()
    finally:
        context.close()
