"""The Parameters page in Streamlit's AppTest: every preset renders, bad input shows a short message under its own
field only, huge shapes read in short units, and the count for the loaded model equals its tensors' sizes."""
from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from harness.apptest import open_page, rerun
from model.calculator.params import PRESETS, count_parameters
from viz.format import format_si

K = "params_"


@pytest.fixture
def app() -> AppTest:
    return open_page("parameters")


def metric(at: AppTest, label: str) -> str:
    return next(m for m in at.metric if m.label.startswith(label)).value


def total_help(at: AppTest) -> str:
    """The exact total, written under the short metric."""
    return next(c.value for c in at.caption if c.value.startswith("exactly "))


def column_of(at: AppTest, key: str):
    """The form column holding the widget with this key (its inline message must be in there too)."""
    for col in at.columns:
        if any(w.key == key for w in [*col.number_input, *col.selectbox]):
            return col
    raise AssertionError(f"no column holds {key}")


def table_with(at: AppTest, column: str):
    """The first st.dataframe / st.table with this column (AppTest does not expose dataframe keys)."""
    for df in [*at.dataframe, *at.table]:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with column {column!r}")


def test_default_is_the_apps_model(app):
    assert app.selectbox(key=K + "preset").value == "SmolLM2-135M"
    assert total_help(app).startswith("exactly 134,515,008")
    assert metric(app, "Total parameters") == "134.5 M"
    assert not app.error


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_renders(app, name):
    app.selectbox(key=K + "preset").set_value(name)
    rerun(app)
    assert not app.error
    assert total_help(app).startswith(f"exactly {count_parameters(**PRESETS[name]).total:,}")
    assert app.number_input(key=K + "d_model").value == PRESETS[name]["d_model"]
    assert len(app.get("plotly_chart")) >= 5
    assert app.query_params == {"preset": name} or name == "SmolLM2-135M"


def test_published_totals_on_the_page(app):
    app.selectbox(key=K + "preset").set_value("GPT-2 small")
    rerun(app)
    assert total_help(app).startswith("exactly 124,439,808")
    app.selectbox(key=K + "preset").set_value("Llama-2-7B")
    rerun(app)
    assert total_help(app).startswith("exactly 6,738,415,616")
    assert metric(app, "Total parameters") == "6.738 B"


def test_editing_a_field_switches_to_custom_and_into_the_link(app):
    app.number_input(key=K + "n_layers").set_value(31)
    rerun(app)
    assert app.selectbox(key=K + "preset").value == "custom"
    assert app.number_input(key=K + "n_layers").value == 31
    app.checkbox(key=K + "tied_embeddings").uncheck()
    rerun(app)
    edited = {**PRESETS["SmolLM2-135M"], "n_layers": 31, "tied_embeddings": False}
    assert total_help(app).startswith(f"exactly {count_parameters(**edited).total:,}")
    # SmolLM2's 3 key/value heads and MLP width are explicit (empty would mean 'as many as the heads', '4 x width')
    assert app.query_params == {"preset": "custom", "layers": "31", "kv": "3", "ff": "1536", "tied": "0"}


@pytest.mark.parametrize("key, value, words", [
    ("n_layers", 10**7, "at most 10,000"),
    ("d_model", 0, "at least 1"),
    ("vocab_size", -5, "at least 1"),
    ("n_heads", 15, "must divide the width 576"),
    ("n_kv_heads", 2, "must divide the 9 heads"),
    ("d_model", None, "required"),
    ("head_dim", -64, "at least 1"),
    ("max_positions", 10**12, "at most 1,000,000,000"),
])
def test_bad_input_marks_only_its_own_field(app, key, value, words):
    app.number_input(key=K + key).set_value(value)
    rerun(app)
    own = [c.value for c in column_of(app, K + key).caption]
    assert any(words in c for c in own), own
    others = [c.value for col in app.columns for c in col.caption if ":red[" in c.value]
    assert len(others) == 1                                                    # no other field is marked
    assert not [m for m in app.metric if m.label == "Total parameters"]       # no numbers from a bad shape
    assert "Fix the field" in app.warning[0].value                            # and a pointer to the field


def test_optional_fields_can_be_left_empty(app):
    app.selectbox(key=K + "preset").set_value("GPT-2 small")
    rerun(app)
    assert app.number_input(key=K + "head_dim").value is None                 # automatic: width / heads
    app.number_input(key=K + "n_kv_heads").set_value(None)
    rerun(app)
    assert not app.error
    assert total_help(app).startswith("exactly 124,439,808")


def test_huge_shapes_read_in_short_units(app):
    for key, value in (("n_layers", 10_000), ("d_model", 1_048_576), ("n_heads", 32), ("n_kv_heads", 8),
                       ("vocab_size", 10_000_000), ("d_ff", 16_777_216), ("max_positions", 1_000_000_000)):
        app.number_input(key=K + key).set_value(value)
    rerun(app)
    values = [m.value for m in app.metric]
    assert all(len(v) <= 10 for v in values[:4]), values                      # four in a row: short values
    assert all(len(v) <= 13 for v in values[4:]), values                      # three in a row
    assert metric(app, "Total parameters") == format_si(count_parameters(
        vocab_size=10_000_000, d_model=1_048_576, n_layers=10_000, n_heads=32, n_kv_heads=8, d_ff=16_777_216,
        max_positions=1_000_000_000, tied_embeddings=True).total, digits=4)
    assert re.fullmatch(r"[\d.]+e\d+ TFLOPs", metric(app, "total at")), values   # not a wall of digits
    assert re.fullmatch(r"[\d.]+(e\d+)? PB", metric(app, "Weights in bf16")), values


def test_compare_two_shapes(app):
    app.selectbox(key=K + "cmp_a").set_value("Llama-2-7B")
    app.selectbox(key=K + "cmp_b").set_value("Llama-3-8B")
    rerun(app)
    table = table_with(app, "Llama-2-7B")
    assert list(table.columns) == ["Llama-2-7B", "Llama-3-8B"]
    assert table.iloc[0]["Llama-2-7B"] == "6,738,415,616"
    app.selectbox(key=K + "cmp_a").set_value("shape above")
    app.number_input(key=K + "d_model").set_value(0)                          # shape above broken: no crash
    rerun(app)
    assert any("shape above" in i.value for i in app.info)


def test_memory_and_kv_table(app):
    app.selectbox(key=K + "preset").set_value("Llama-3-8B")
    rerun(app)
    kv = table_with(app, "KV bytes / token")
    assert [row.split()[0] for row in kv["attention"]] == ["MHA", "GQA", "MQA"]
    per_token = dict(zip([row.split()[0] for row in kv["attention"]], kv["KV bytes / token"], strict=True))
    assert per_token["MHA"] == 4 * per_token["GQA"] == 32 * per_token["MQA"] == 2 * 32 * 32 * 128 * 2
    assert app.number_input(key=K + "context").value is None                  # empty: the shape's own context
    assert "8,192" in app.number_input(key=K + "context").proto.placeholder


def test_check_against_loaded_model(app):
    assert any("134,515,008" in s.value and "match exactly" in s.value for s in app.success)
    table = table_with(app, "sum of tensors")
    assert list(table["match"]) == ["✓"] * len(table)


def test_no_text_box_or_model_controls_on_this_page(app):
    keys = {w.key for kind in ("text_area", "slider", "toggle") for w in app.get(kind)}
    assert not keys & {"text", "layer", "head", "sink"}
