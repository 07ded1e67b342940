"""What the AppTest suites and the page benches share: opening the app on a page with a link's query params,
reruns that fail on an exception, and reading the figures the app sent.

Importing it has every AppTest of the process find the installed Streamlit components once (scan_components_once):
a server scans the installed packages' metadata once as it starts, AppTest did it for every new AppTest (~1.2 s of
parsing ~200 packages' metadata on the 2-core Xeon: two thirds of opening a lesson step in AppTest)."""
from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import numpy as np
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from app_pages.navigation import url_path

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "router.py")   # the script each session runs (app.py serves it)
EXAMPLES = json.loads((ROOT / "assets/examples.json").read_text(encoding="utf-8"))
STREAMLITS_SCAN = manifest_scanner.scan_component_manifests


@functools.cache
def installed_components() -> tuple:
    """Streamlit's scan of the installed packages for components: ((manifest, package root), ...), made once."""
    return tuple(STREAMLITS_SCAN())


def scan_components_once() -> None:
    """Every later component scan (each new AppTest's first run makes one) answers with installed_components()."""
    manifest_scanner.scan_component_manifests = lambda max_workers=None: list(installed_components())


scan_components_once()


def go_to(at: AppTest, page: str) -> AppTest:
    """Open another page of the app in the same session at its next run, as its link in the navigation does
    (AppTest.switch_page knows only file pages; Streamlit knows a page by the hash of its url_path:
    tests/unit/test_streamlit_contract.py)."""
    at._page_hash = calc_hash(url_path(page))
    return at


def example(word: str) -> str:
    """The text of the example whose title contains word."""
    return next(e["text"] for e in EXAMPLES if word.lower() in e["title"].lower())


def open_page(page: str = "attention", **params) -> AppTest:
    """A fresh session opened on a page with these query params, as a share link would open it."""
    at = AppTest.from_file(APP, default_timeout=120)
    if page != "attention":
        at.query_params["page"] = page          # the app's ?page=<name> opens that page with the other params
    for key, value in params.items():
        at.query_params[key] = value
    return rerun(at)


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def titles(at: AppTest) -> list[str]:
    return [(f["layout"].get("title") or {}).get("text", "") for f in figures(at)]


def array(value) -> np.ndarray:
    """A plotly JSON array: a list, or plotly's typed-array form {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        out = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return out.reshape([int(n) for n in str(shape).split(",")]) if shape else out
    return np.array(value, dtype=float)


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning).replace("\\", "")


def sidebar_widget_keys(at: AppTest) -> list[str]:
    """The keys of the widgets in the sidebar, top to bottom (captions as their text)."""
    out = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if child.type == "caption":
                out.append(child.value)
            elif getattr(child, "key", None):
                out.append(child.key)
            walk(child)
    walk(at.sidebar)
    return out


def widget_values(at: AppTest) -> dict[str, object]:
    """Every keyed widget's value."""
    out = {}
    for kind in ("slider", "select_slider", "toggle", "checkbox", "selectbox", "number_input", "text_area",
                 "multiselect", "segmented_control", "pills", "radio"):
        for widget in at.get(kind):
            if widget.key:
                out[widget.key] = widget.value
    return out


def run_until(at: AppTest, done, timeout_s: float = 120.0) -> AppTest:
    """Rerun (as the page's own polling does) until done(at) holds: for work that runs in the background."""
    import time

    deadline = time.monotonic() + timeout_s
    while not done(at):
        assert time.monotonic() < deadline, "the background work did not finish in time"
        time.sleep(0.5)
        rerun(at)
    return at
