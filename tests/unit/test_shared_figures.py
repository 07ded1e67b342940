"""Figures shared between sessions: the key of a call (app_core.call_key) and app_pages.frame.widgets.shared_figure."""
from __future__ import annotations

import numpy as np
import pytest

from app_core.call_key import Unkeyable, call_key, value_key
from app_pages.frame import widgets
from viz.attention import WORDS, head_heatmap


def test_equal_values_have_equal_keys_and_any_difference_another():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert value_key(a) == value_key(a.copy())
    assert value_key(a) != value_key(a.astype(np.float64))          # same numbers, another dtype
    assert value_key(a) != value_key(a.reshape(4, 3))               # same bytes, another shape
    b = a.copy()
    b[2, 3] = np.nextafter(b[2, 3], np.float32(1e9))                # one ulp in one cell
    assert value_key(a) != value_key(b)
    assert value_key(a[:, ::2]) == value_key(np.ascontiguousarray(a[:, ::2]))   # a view is keyed by its values
    assert value_key(["a", 1, None]) != value_key(("a", 1, None))
    assert value_key(1) != value_key(1.0) and value_key(True) != value_key(1)
    assert value_key(WORDS) == value_key(WORDS) and hash(value_key(WORDS))


def test_a_call_is_keyed_by_function_and_arguments():
    p = np.eye(3, dtype=np.float32)
    assert call_key(head_heatmap, (p, ["a", "b", "c"]), {"query": 1, "height": 400}) == \
        call_key(head_heatmap, (p.copy(), ["a", "b", "c"]), {"height": 400, "query": 1})
    assert call_key(head_heatmap, (p, ["a", "b", "c"]), {"query": 1}) != \
        call_key(head_heatmap, (p, ["a", "b", "c"]), {"query": 2})
    with pytest.raises(Unkeyable):
        call_key(head_heatmap, (object(),), {})
    with pytest.raises(Unkeyable):
        value_key(np.array(["a", None], dtype=object))


def test_functions_are_keyed_by_name_and_frozensets_by_members():
    assert value_key(head_heatmap) == value_key(head_heatmap) != value_key(call_key)
    with pytest.raises(Unkeyable):
        value_key(lambda x: x)                                   # no name to find it by
    assert value_key(frozenset({1, 2})) == value_key(frozenset({2, 1})) != value_key(frozenset({1}))


@pytest.fixture
def session(monkeypatch):
    """A session's state and a fresh figure cache."""
    from app_core.budget import ByteBudgetCache
    state = {}
    cache = ByteBudgetCache("figures", 2**24, size_of=lambda entry: entry[1])
    monkeypatch.setattr(widgets.st, "session_state", state)
    monkeypatch.setattr(widgets.caches, "caches", lambda: {"figures": cache})
    return state


def _pattern(seed: int) -> np.ndarray:
    p = np.tril(np.random.default_rng(seed).random((4, 4), dtype=np.float32))
    return p / p.sum(axis=1, keepdims=True)


def test_sessions_asking_for_the_same_figure_get_one(session):
    tokens = ["The", " cat", " sat", "."]
    first = widgets.shared_figure(head_heatmap, _pattern(0), tokens, query=2, words=WORDS)
    again = widgets.shared_figure(head_heatmap, _pattern(0), tokens, query=2, words=WORDS)
    other = widgets.shared_figure(head_heatmap, _pattern(1), tokens, query=2, words=WORDS)
    assert again is first and other is not first
    np.testing.assert_array_equal(np.asarray(other.data[0].z, dtype=np.float32)[3], _pattern(1)[3])


def test_presenter_text_is_enlarged_once_however_often_a_shared_figure_is_shown(session, monkeypatch):
    shown = []
    monkeypatch.setattr(widgets.st, "plotly_chart", lambda fig, **kwargs: shown.append(fig.layout.font.size))
    tokens = ["a", "b", "c", "d"]
    plain = head_heatmap(_pattern(0), tokens)
    session[widgets.PRESENT_KEY] = True
    for _ in range(3):
        fig = widgets.shared_figure(head_heatmap, _pattern(0), tokens)
        widgets.show_figure(fig, key="k", filename="f")
    assert shown == [pytest.approx(plain.layout.font.size * widgets.PRESENTER_FONT_SCALE)] * 3
    session[widgets.PRESENT_KEY] = False
    widgets.show_figure(widgets.shared_figure(head_heatmap, _pattern(0), tokens), key="k", filename="f")
    assert shown[-1] == plain.layout.font.size


def test_a_train_runs_figure_is_made_once_and_its_json_once(session):
    """app_pages/train/runs.shared_figure: a class watching a run live asks for the same figures ~2.5 times a second
    each; the figure is built once, and its dict and JSON are made once (frozen), not at every session's poll."""
    import plotly.graph_objects as go

    from app_pages.train import runs
    from server import streamlit_fixes

    built = []

    def build():
        built.append(1)
        return go.Figure(go.Scatter(x=np.arange(50), y=np.linspace(0.0, 1.0, 50)))
    first = runs.shared_figure(("loss", 1), build)
    again = runs.shared_figure(("loss", 1), build)
    assert again is first and len(built) == 1
    spec = first.to_dict()
    assert isinstance(spec, streamlit_fixes.FrozenSpec) and first.to_dict() is spec
    assert streamlit_fixes.to_json(spec, validate=False) is spec.json
    assert spec.json == streamlit_fixes.PLOTLYS_TO_JSON(build().to_dict(), validate=False)
    assert runs.shared_figure(("loss", 2), build) is not first and len(built) == 3
