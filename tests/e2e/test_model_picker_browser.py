"""End-to-end: the Model picker in a real headless Chromium at 1024x768, with a models folder of tiny GGUFs
(ATLAS_MODELS_DIR): picking a model redraws the whole-model overview with its layer and head counts and moves the
sliders' ranges; the Share link names it and reopens it in a fresh browser."""
from __future__ import annotations

import os
from unittest import mock

import pytest

from harness.browser import running_app
from tests.app.models_folder import SHAPES, write_models
from tests.e2e.test_browser import (
    HEALTH_TIMEOUT_S,
    PROJECTOR,
    ROOT,
    assert_no_exception,
    controls,
    digest,
    open_view,
    query,
    rerun,
    share_box_link,
)

# The overview heatmap's grid: [rows, columns] of its first trace's z (heads x layers).
GRID_JS = """() => {
  const chart = document.querySelector('.st-key-w_overview [data-testid="stPlotlyChart"] .js-plotly-plot');
  if (!chart) return null;
  const z = chart._fullData[0].z;                       // rows of typed arrays once plotly decoded them
  return z && z.length ? [z.length, z[0].length] : null;
}"""
SLIDER_MAX_JS = """(key) => {
  const el = document.querySelector('.st-key-' + key + ' input[type="range"]');
  return el ? Number(el.getAttribute('aria-valuemax') || el.max) : null;
}"""


def wait_for_grid(page, n_layers: int) -> None:
    """Until the overview heatmap shows `n_layers` columns."""
    page.wait_for_function(f"() => ({GRID_JS})() && ({GRID_JS})()[1] === {n_layers}", timeout=120_000)


@pytest.fixture(scope="module")
def models_url(tmp_path_factory):
    """A server whose models folder holds the tiny models; its base URL."""
    folder = write_models(tmp_path_factory.mktemp("models"))
    with mock.patch.dict(os.environ, {"ATLAS_MODELS_DIR": str(folder)}):
        log = tmp_path_factory.mktemp("streamlit") / "server.log"
        with running_app(ROOT, log, HEALTH_TIMEOUT_S) as (_, url):
            yield url


def test_picking_a_model_redraws_with_its_shape_and_the_link_reopens_it(models_url, new_page):
    name = "tiny-gpt2"
    tiny = SHAPES[name]
    page = new_page(*PROJECTOR)
    open_view(page, models_url + "/?view=model")
    before = page.evaluate(GRID_JS)
    assert before == [9, 30], before                                   # the built-in SmolLM2-135M
    controls(page, ["w_model"])                                        # the picker's component has mounted
    combo = page.locator('.st-key-w_model input[role="combobox"]')
    combo.click()
    combo.fill(name)                                                   # the list narrows to the model
    option = page.locator('[role="option"]', has_text=f"{name} · gpt2")
    rerun(page, option.click)
    wait_for_grid(page, tiny.n_layers)
    assert_no_exception(page, "after picking a model")
    assert page.evaluate(GRID_JS) == [tiny.n_heads, tiny.n_layers]
    assert page.evaluate(SLIDER_MAX_JS, "layer") == tiny.n_layers - 1
    assert page.evaluate(SLIDER_MAX_JS, "head") == tiny.n_heads - 1
    assert query(page.url).get("model") == name
    shown = digest(page, "w_overview")
    link = share_box_link(page)
    assert query(link).get("model") == name and query(link).get("view") == "model"

    fresh = new_page(*PROJECTOR)
    open_view(fresh, link)
    assert_no_exception(fresh, f"the shared link {link}")
    wait_for_grid(fresh, tiny.n_layers)                                # the overview can draw after other charts
    assert fresh.evaluate(GRID_JS) == [tiny.n_heads, tiny.n_layers]
    assert digest(fresh, "w_overview") == shown
    assert name in controls(fresh, ["w_model"])["w_model"]["selected"]
