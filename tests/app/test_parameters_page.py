"""The Parameters page in Streamlit's AppTest: every preset renders, bad input shows a message next to its field."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from model.params import PRESETS, count_parameters

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "parameters.py")
K = "params_"


@pytest.fixture
def app() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def total_metric(at: AppTest) -> str:
    return next(m.value for m in at.metric if m.label == "Total parameters")


def column_of(at: AppTest, key: str):
    """The form column holding the widget with this key (its inline message must be in there too)."""
    for col in at.columns:
        widgets = [*col.number_input, *col.selectbox, *col.checkbox]
        if any(w.key == key for w in widgets):
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
    assert total_metric(app) == "134,515,008"
    assert not app.error


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_renders(app, name):
    app.selectbox(key=K + "preset").set_value(name).run()
    assert not app.exception, app.exception
    assert not app.error
    assert total_metric(app) == f"{count_parameters(**PRESETS[name]).total:,}"
    assert app.number_input(key=K + "d_model").value == PRESETS[name]["d_model"]
    assert len(app.get("plotly_chart")) >= 5
    assert app.selectbox(key=K + "preset").value == name


def test_published_totals_on_the_page(app):
    app.selectbox(key=K + "preset").set_value("GPT-2 small").run()
    assert total_metric(app) == "124,439,808"
    app.selectbox(key=K + "preset").set_value("Llama-2-7B").run()
    assert total_metric(app) == "6,738,415,616"


def test_mlp_share_visible_for_qwen3(app):
    app.selectbox(key=K + "preset").set_value("Qwen3-8B").run()
    share = next(m.value for m in app.metric if m.label.startswith("MLP %"))
    assert 77 < float(share.rstrip("%")) < 80
    assert any("MLP holds 78%" in md.value for md in app.markdown)


def test_editing_a_field_switches_to_custom(app):
    before = total_metric(app)
    app.number_input(key=K + "n_layers").set_value(31).run()
    assert not app.exception
    assert app.selectbox(key=K + "preset").value == "custom"
    assert total_metric(app) != before
    assert app.number_input(key=K + "n_layers").value == 31
    app.checkbox(key=K + "tied_embeddings").uncheck().run()     # untie: adds vocab x d_model = 49152 x 576
    edited = {**PRESETS["SmolLM2-135M"], "n_layers": 31, "tied_embeddings": False}
    assert total_metric(app) == f"{count_parameters(**edited).total:,}"
    app.selectbox(key=K + "preset").set_value("custom").run()  # picking custom keeps the edited shape
    assert app.number_input(key=K + "n_layers").value == 31


@pytest.mark.parametrize("key, value, words", [
    ("n_layers", 10**7, "n_layers"),
    ("d_model", 0, "d_model"),
    ("vocab_size", -5, "vocab_size"),
    ("n_heads", 7, "divide d_model"),
    ("n_kv_heads", 2, "divide n_heads"),
    ("d_ff", None, "d_ff"),
    ("head_dim", -64, "head_dim"),
    ("max_positions", 10**12, "max_positions"),
])
def test_bad_input_message_next_to_the_field(app, key, value, words):
    app.number_input(key=K + key).set_value(value).run()
    assert not app.exception, app.exception
    messages = [e.value for e in column_of(app, K + key).error]
    assert messages and words in messages[0]
    assert not [m for m in app.metric if m.label == "Total parameters"]       # no numbers from a bad shape
    assert app.warning                                                         # and a pointer to the field


def test_bad_context_and_batch(app):
    app.number_input(key=K + "context").set_value(0).run()
    assert not app.exception
    assert "context length" in column_of(app, K + "context").error[0].value
    app.number_input(key=K + "context").set_value(4096)
    app.number_input(key=K + "batch").set_value(-2).run()
    assert not app.exception
    assert "batch" in column_of(app, K + "batch").error[0].value
    assert total_metric(app) == "134,515,008"      # the count above is unaffected


def test_optional_fields_can_be_left_empty(app):
    app.selectbox(key=K + "preset").set_value("GPT-2 small").run()
    assert app.number_input(key=K + "head_dim").value is None          # auto: d_model / heads
    app.number_input(key=K + "n_kv_heads").set_value(None).run()
    assert not app.exception and not app.error
    assert total_metric(app) == "124,439,808"


def test_compare_two_shapes(app):
    app.selectbox(key=K + "cmp_a").set_value("Llama-2-7B")
    app.selectbox(key=K + "cmp_b").set_value("Llama-3-8B").run()
    assert not app.exception
    table = table_with(app, "Llama-2-7B")
    assert list(table.columns) == ["Llama-2-7B", "Llama-3-8B"]
    assert table.iloc[0]["Llama-2-7B"] == "6,738,415,616"
    app.selectbox(key=K + "cmp_a").set_value("shape above").run()
    assert not app.exception
    app.number_input(key=K + "d_model").set_value(0).run()             # shape above broken: a message, no crash
    assert not app.exception
    assert any("shape above" in i.value for i in app.info)


def test_memory_and_kv_table(app):
    app.selectbox(key=K + "preset").set_value("Llama-3-8B").run()
    kv = table_with(app, "KV bytes / token")
    assert [row.split()[0] for row in kv["attention"]] == ["MHA", "GQA", "MQA"]
    per_token = dict(zip([row.split()[0] for row in kv["attention"]], kv["KV bytes / token"], strict=True))
    assert per_token["MHA"] == 4 * per_token["GQA"] == 32 * per_token["MQA"] == 2 * 32 * 32 * 128 * 2


def test_check_against_loaded_model(app):
    assert any("134,515,008" in s.value and "match exactly" in s.value for s in app.success)
    table = table_with(app, "sum of tensors")
    assert list(table["match"]) == ["✓"] * len(table)


def test_model_load_failure_degrades_to_a_message(monkeypatch):
    import app_pages._state as state

    def broken():
        raise RuntimeError("no model here")

    monkeypatch.setattr(state, "get_model", broken)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    assert any("no model here" in i.value for i in at.info)
    assert total_metric(at) == "134,515,008"


def test_fits_a_narrow_screen(app):
    """At 1024 px the main column is ~560-680 px: metrics two per row (or three short ones), FLOPs in a compact unit,
    the five switches in one wrapping row at their own width, every chart in the app's theme (its font)."""
    flops = {m.label: m.value for m in app.metric if not m.label.startswith(("Total", "MLP", "Weights", "KV"))}
    assert set(flops) == {"total at 8,192 tokens", "matmuls (weights)", "attention (QKᵀ, AV)"}
    assert flops["total at 8,192 tokens"] == "835 M"
    assert all(re.fullmatch(r"\d[\d.,]* [kMGT]", v) for v in flops.values()), flops
    summary_rows = [col for col in app.columns if any(m.label in ("Total parameters", "Weights in bf16")
                                                      for m in col.metric)]
    assert summary_rows and all(len(col.metric) == 1 for col in summary_rows)
    flag_keys = {K + f for f in ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias", "qk_norm")}
    assert not any(cb.key in flag_keys for col in app.columns for cb in col.checkbox)   # not 5 squeezed columns
    assert {cb.key for cb in app.checkbox} >= flag_keys
    charts = app.get("plotly_chart")
    assert len(charts) >= 5 and all(c.proto.theme == "streamlit" for c in charts)
