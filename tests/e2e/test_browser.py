"""End-to-end: the real app in a real (headless) Chromium.

One `streamlit run app.py` per module. The tests type a text, pick a head with the sidebar slider, check that the
URL (the share link) restores the same view in a fresh browser, then open every page by its URL, wait for its
charts, check that no page shows an exception, and save screenshots at 1280x800 and 1024x768 (under pytest's temp
dir; also copied to $E2E_SCREENSHOT_DIR when set). At 1024x768 (a projector): the Attention share link is "/" (an
old /attention link forwards there), the sidebar's layer/head/sink controls need no scrolling, there is no Deploy
button, and a click on the Whole-model overview picks that head.

Needs Debian's chromium at /usr/bin/chromium and the `playwright` Python package (its own browsers are not used).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright import sync_api

from tests.e2e.browser_harness import CHROMIUM, CHROMIUM_ARGS, IDLE_WITH_CHARTS_JS, free_port

assert Path(CHROMIUM).exists(), f"end-to-end browser tests need Debian's chromium at {CHROMIUM} (apt install chromium)"

ROOT = Path(__file__).resolve().parents[2]
# page -> its URL path; the default page (attention) is served at the root, "/" (/attention is an old link that
# forwards there)
PAGES = {"attention": "", "causal-mask": "causal-mask", "softmax": "softmax", "positional": "positional",
         "parameters": "parameters"}
ATTENTION_VIEWS = ["layer", "model", "query", "next"]      # the other tabs of Attention (?view=...)
VIEWPORTS = [(1280, 800), (1024, 768)]
HEALTH_TIMEOUT_S = 90
FIRST_LOAD_MS = 180_000        # the first run loads the model; 2 shared CPU cores can be slow
RERUN_MS = 90_000
TEXT = "The quick brown fox jumps over the lazy dog, and then the quick brown fox jumps over the lazy dog again."
NEW_HEAD = 3
MAX_SCROLL_SHOTS = 12          # screenshots further down a long page (what a user sees when scrolling)

# Page coordinates of the centre of cell (layer, head) of the first plotly chart (the Whole-model overview).
CELL_CENTRE_JS = """([layer, head]) => {
  const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  const fl = gd._fullLayout, box = gd.getBoundingClientRect();
  return [box.left + fl.xaxis._offset + fl.xaxis.l2p(layer), box.top + fl.yaxis._offset + fl.yaxis.l2p(head)];
}"""
# A plotly figure title (.gtitle) with exactly this text is drawn.
TITLE_SHOWN_JS = """(title) => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle')]
  .some(t => t.textContent.trim() === title)"""


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, the server's whole process group (it was started in its own session)."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """A `streamlit run app.py` on a free local port; its base URL. The process group is killed afterwards."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("streamlit") / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.runOnSave", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit not healthy after {HEALTH_TIMEOUT_S} s:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield base
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def screenshot_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def _new_page(browser, width=1280, height=800):
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(RERUN_MS)
    return context, context.new_page()


def wait_idle_with_charts(page, min_charts: int = 1, timeout_ms: int = RERUN_MS) -> None:
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=min_charts, timeout=timeout_ms, polling=100)


def wait_for_title(page, title: str, timeout_ms: int = RERUN_MS) -> None:
    page.wait_for_function(TITLE_SHOWN_JS, arg=title, timeout=timeout_ms, polling=100)


def assert_no_exception(page, where: str) -> None:
    errors = page.locator('[data-testid="stException"]')
    if errors.count():
        pytest.fail(f"{where}: the app shows an exception:\n" + "\n---\n".join(errors.all_inner_texts())[:3000])
    not_found = page.locator('[role="dialog"]', has_text="Page not found")
    if not_found.count():
        pytest.fail(f"{where}: the app shows 'Page not found' for {page.url}")


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


def save_screenshots(page, name: str, out_dir: Path) -> list[Path]:
    """The viewport as the user first sees it, then one shot per screen further down the main area."""
    shots = [out_dir / f"{name}.png"]
    page.screenshot(path=str(shots[0]))
    main = page.locator('[data-testid="stMain"]')
    height, screen = main.evaluate("e => [e.scrollHeight, e.clientHeight]")
    n = min(MAX_SCROLL_SHOTS, max(0, -(-height // max(screen, 1)) - 1))
    for i in range(1, n + 1):
        main.evaluate("(e, y) => { e.scrollTop = y; }", i * screen)
        page.wait_for_timeout(150)        # let the scroll paint; nothing reruns
        shots.append(out_dir / f"{name}_scroll{i:02d}.png")
        page.screenshot(path=str(shots[-1]))
    main.evaluate("e => { e.scrollTop = 0; }")
    return shots


def _copy_out(paths: list[Path]) -> None:
    target = os.environ.get("E2E_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for p in paths:
            shutil.copy2(p, Path(target) / p.name)


def test_text_head_and_share_link(browser, app_url):
    """Type a text, pick head 3 with the slider; the URL carries both and restores them in a fresh browser."""
    context, page = _new_page(browser)
    try:
        page.goto(app_url)
        wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
        wait_for_title(page, "Layer 0, head 0")
        assert_no_exception(page, "first load")

        text_area = page.locator('[data-testid="stSidebar"] textarea')
        text_area.fill(TEXT)
        text_area.press("Control+Enter")
        page.wait_for_url(lambda url: query(url).get("text") == TEXT)
        wait_idle_with_charts(page)
        wait_for_title(page, "Layer 0, head 0")
        assert page.locator('[data-testid="stSidebar"]').get_by_text("/ 512 tokens").count() == 1
        assert_no_exception(page, "after typing a text")

        head = page.locator('[data-testid="stSidebar"] input[type="range"][aria-label="Head"]')
        for step in range(1, NEW_HEAD + 1):  # one key per rerun: a rerun under load can take the focus away
            head.focus()
            head.press("ArrowRight")
            wait_for_title(page, f"Layer 0, head {step}")
        page.wait_for_url(lambda url: query(url).get("head") == str(NEW_HEAD))
        wait_idle_with_charts(page)
        wait_for_title(page, f"Layer 0, head {NEW_HEAD}")
        assert head.input_value() == str(NEW_HEAD)
        assert_no_exception(page, "after picking a head")
        share = page.url
    finally:
        context.close()

    params = query(share)
    assert params.get("head") == str(NEW_HEAD), share
    assert params.get("text") == TEXT, share
    assert params.get("layer") == "0", share

    context, page = _new_page(browser)          # a fresh browser profile opening the shared link
    try:
        page.goto(share)
        wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
        wait_for_title(page, f"Layer 0, head {NEW_HEAD}")
        sidebar = page.locator('[data-testid="stSidebar"]')
        assert sidebar.locator('input[type="range"][aria-label="Head"]').input_value() == str(NEW_HEAD)
        assert sidebar.locator('input[type="range"][aria-label="Layer"]').input_value() == "0"
        assert sidebar.locator("textarea").input_value() == TEXT
        assert query(page.url).get("head") == str(NEW_HEAD)
        assert_no_exception(page, "shared link")
    finally:
        context.close()


@pytest.mark.parametrize("width,height", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_every_page_renders(browser, app_url, screenshot_dir, width, height):
    """Each page opened by its URL (and each tab of Attention) draws its charts and shows no exception or
    'Page not found'; screenshots for a human to look at."""
    context, page = _new_page(browser, width, height)
    shots: list[Path] = []
    visits = [(name, f"{app_url}/{path}") for name, path in PAGES.items()]
    visits += [(f"attention-{view}", f"{app_url}/?view={view}") for view in ATTENTION_VIEWS]
    try:
        for name, url in visits:
            page.goto(url)
            wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
            where = f"{name} ({url.removeprefix(app_url)}) at {width}x{height}"
            assert urlsplit(page.url).path.strip("/") == urlsplit(url).path.strip("/"), where
            if name.startswith("attention-"):
                assert query(page.url).get("view") == name.removeprefix("attention-"), where
            assert_no_exception(page, where)
            shots += save_screenshots(page, f"{name}_{width}x{height}", screenshot_dir)
            assert_no_exception(page, f"{where}, after scrolling")
    finally:
        context.close()
        _copy_out(shots)
    assert len(shots) >= len(visits)


def test_attention_share_link_is_the_root(browser, app_url):
    """The Attention page's share link is "/?..." (Streamlit serves the default page only at the root) and opens
    without "Page not found"; an old /attention link forwards to "/" and keeps its settings."""
    context, page = _new_page(browser)
    try:
        page.goto(f"{app_url}/?view=layer&layer=4&head=2")
        wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
        wait_for_title(page, "Layer 4: all 9 heads")
        share = page.url
        assert urlsplit(share).path in ("", "/"), share
        assert "attention" not in urlsplit(share).path
        assert_no_exception(page, "Attention page")
    finally:
        context.close()

    for link, expected in ((share, {"view": "layer", "layer": "4", "head": "2"}),
                           (f"{app_url}/attention?view=layer&layer=7&head=1", {"view": "layer", "layer": "7",
                                                                               "head": "1"})):
        context, page = _new_page(browser)          # a fresh browser profile opening the link
        try:
            page.goto(link)
            wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
            wait_for_title(page, f"Layer {expected['layer']}: all 9 heads")
            assert urlsplit(page.url).path in ("", "/"), page.url
            params = query(page.url)
            assert {k: params.get(k) for k in expected} == expected, page.url
            page.wait_for_timeout(500)              # a "Page not found" dialog would be up by now
            assert_no_exception(page, link.removeprefix(app_url))
        finally:
            context.close()


@pytest.mark.parametrize("text", ["", "word " * 700], ids=["example", "truncated"])
def test_sidebar_controls_fit_a_projector_screen(browser, app_url, text):
    """At 1024x768 the layer and head sliders and the sink switch are visible without scrolling the sidebar
    (also when a long text shows the truncation note), and there is no Deploy button."""
    context, page = _new_page(browser, 1024, 768)
    try:
        page.goto(f"{app_url}/?view=head" + (f"&text={text.replace(' ', '+')}" if text else ""))
        wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
        sidebar = page.locator('[data-testid="stSidebar"]')
        controls = [sidebar.locator('input[type="range"][aria-label="Layer"]'),
                    sidebar.locator('input[type="range"][aria-label="Head"]'),
                    sidebar.get_by_text("Hide attention sink")]
        for control in controls:
            box = control.bounding_box()
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 768, box
        assert sidebar.get_by_text("/ 512 tokens").count() == 1
        assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
        assert page.get_by_role("button", name="Deploy").count() == 0
    finally:
        context.close()


@pytest.mark.parametrize("overview", ["previous-token score", "pattern thumbnails"])
def test_whole_model_overview_click_picks_a_head(browser, app_url, overview):
    """A click on a cell of the Whole-model overview (layers across, heads down) selects that head."""
    context, page = _new_page(browser, 1024, 768)
    try:
        page.goto(f"{app_url}/?view=model&layer=0&head=0")
        wait_idle_with_charts(page, timeout_ms=FIRST_LOAD_MS)
        choice = page.get_by_role("radio", name=overview)
        if choice.get_attribute("aria-checked") != "true":
            choice.click()
            page.wait_for_timeout(300)
            wait_idle_with_charts(page, min_charts=2)
        for layer, head in ((16, 0), (3, 7), (29, 8)):
            page.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
            x, y = page.evaluate(CELL_CENTRE_JS, [layer, head])
            page.mouse.move(x + 3, y - 4)           # off-centre: anywhere in the cell counts
            page.mouse.click(x + 3, y - 4)
            want = (str(layer), str(head))
            page.wait_for_url(lambda url, want=want: (query(url).get("layer"), query(url).get("head")) == want)
            wait_idle_with_charts(page, min_charts=2)
            wait_for_title(page, f"Selected: layer {layer}, head {head}")
        assert_no_exception(page, f"overview clicks ({overview})")
    finally:
        context.close()
