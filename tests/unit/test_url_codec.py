"""The share-link codec (app_core/link.py) and the page schemas (app_core/schemas.py): pure Python, no Streamlit.

Round trips of random valid states for every page (boundaries and unicode text included), and every malformed
input turned into a valid state plus a note, never an exception.
"""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import pytest

from app_core.link import (
    Choice,
    Context,
    Flag,
    Float,
    Int,
    IntList,
    ModelName,
    Schema,
    Text,
    clamp,
    decode,
    encode,
)
from app_core.schemas import SCHEMAS, TEXT

ROOT = Path(__file__).resolve().parents[2]
CTX = Context(n_layers=30, n_heads=9, head_dim=64, vocab_size=49152, n_tokens=40)
UNICODE = ["Le chat dort.", "数字 1, 2, 3 🙂", "<b>bold</b> & <br>", "a=b&c=d?e#f", "   spaces  ", "\n\ttab", "é" * 50]


def _bounds(param, ctx):
    resolve = lambda b: b(ctx) if callable(b) else b  # noqa: E731
    return resolve(getattr(param, "lo", None)), resolve(getattr(param, "hi", None))


def random_value(param, rng: random.Random, ctx: Context):
    """A valid value for param, often at a boundary."""
    if isinstance(param, Flag):
        return rng.random() < 0.5
    if isinstance(param, Choice):
        return rng.choice(param.options)
    if isinstance(param, ModelName):
        return "Qwen2.5-0.5B-Instruct Q4_K_M.v2"          # no draw: the other settings' draws stay as they were
    if isinstance(param, Text):
        return rng.choice(UNICODE + ["".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(1, 40)))])
    lo, hi = _bounds(param, ctx)
    lo = 0 if lo is None else lo
    hi = lo + 1000 if hi is None else hi
    if isinstance(param, Float):
        rounded = round(rng.uniform(lo, hi), 2)                 # a hand-typed value; 0.0 when the range is tiny
        return rng.choice([lo, hi, rng.uniform(lo, hi), min(max(rounded, lo), hi)])
    if isinstance(param, IntList):
        return tuple(sorted(set(rng.randint(lo, hi) for _ in range(rng.randint(1, param.max_items)))))
    if isinstance(param, Int):
        return rng.choice([lo, hi, rng.randint(lo, hi)])
    raise AssertionError(param)


def effective(state: dict, schema: Schema, ctx: Context) -> dict:
    """What a page shows: every setting that applies, with its default where the state has none."""
    return {p.key: state.get(p.key, p.default_for(ctx)) for p in schema.active(state)}


def through_url(params: dict[str, str]) -> dict[str, list[str]]:
    """What the browser gives back: the query string encoded and parsed again."""
    return parse_qs(urlencode(params), keep_blank_values=True)


@pytest.mark.parametrize("page", list(SCHEMAS))
def test_random_valid_states_round_trip(page):
    schema = SCHEMAS[page]
    rng = random.Random(page)
    for _ in range(300):
        state = {p.key: random_value(p, rng, CTX) for p in schema.params}
        query = through_url(encode(state, schema, CTX))
        decoded, notes = decode(query, schema, CTX)
        assert notes == []
        assert effective(decoded, schema, CTX) == effective(state, schema, CTX), (state, query)


@pytest.mark.parametrize("page", list(SCHEMAS))
def test_defaults_make_an_empty_link(page):
    schema = SCHEMAS[page]
    state = {p.key: p.default_for(CTX) for p in schema.params}
    assert encode(state, schema, CTX) == {}


def test_a_page_link_carries_only_its_own_settings_that_apply():
    attention, parameters = SCHEMAS["attention"], SCHEMAS["parameters"]
    state = {"attention_view": "next", "layer": 7, "head": 3, "sink": True, "text": "Hello there",
             "params_preset": "Llama-3-8B", "mask_n": 5}
    assert encode(state, attention, CTX) == {"view": "next", "text": "Hello there"}   # layer/head do nothing there
    assert encode({**state, "attention_view": "layer"}, attention, CTX) == {
        "view": "layer", "text": "Hello there", "layer": "7", "head": "3", "sink": "1"}
    assert encode(state, parameters, CTX) == {"preset": "Llama-3-8B"}                  # no text on Parameters
    assert "n" in encode(state, SCHEMAS["causal-mask"], CTX)


def test_the_view_setting_does_not_leak_between_pages():
    decoded, _ = decode({"view": ["query"]}, SCHEMAS["positional"], CTX)
    assert decoded == {}                                        # not a view of Positional: dropped
    decoded, _ = decode({"view": ["rope"]}, SCHEMAS["positional"], CTX)
    assert decoded == {"positional_view": "rope"}
    assert "attention_view" not in decoded


GARBAGE = ["", " ", "nan", "inf", "-inf", "1e999", "-1", "99999999999999", "1.5", "abc", "0x10", "１２", "🙂", "%00",
           "<script>", "1,2,,3", ",", "999,-5,3", "True", "None", "x" * 5000]


@pytest.mark.parametrize("page", list(SCHEMAS))
def test_malformed_values_become_valid_state_and_notes(page):
    schema = SCHEMAS[page]
    for param in schema.params:
        for raw in GARBAGE:
            decoded, notes = decode({param.name: [raw]}, schema, CTX)
            if param.key not in decoded:
                assert notes, (param.name, raw)                   # dropped with a note saying so
                continue
            value = decoded[param.key]
            fixed, _ = clamp(decoded, schema, CTX)
            assert fixed == {}, (param.name, raw, value)          # what decode returns is already valid
            if isinstance(param, Int) and not isinstance(param, IntList) and value is not None:
                lo, hi = _bounds(param, CTX)
                assert lo <= value <= hi


def test_out_of_range_values_are_clamped_with_a_note():
    schema = SCHEMAS["attention"]
    decoded, notes = decode({"layer": ["999"], "head": ["-1"], "q": ["400"]}, schema, CTX)
    assert decoded == {"layer": 29, "head": 0, "q": 39}
    assert len(notes) == 3 and "layer=999" in notes[0] and "using 29" in notes[0]
    decoded, notes = decode({"temp": ["1e999"]}, SCHEMAS["softmax"], CTX)
    assert decoded == {} and "finite" in notes[0]
    decoded, notes = decode({"temp": ["0.001"]}, SCHEMAS["softmax"], CTX)
    assert decoded == {"temp": 0.05} and "0.05" in notes[0]


def test_repeated_and_unknown_params():
    decoded, notes = decode({"layer": ["3", "7"], "zzz": ["1"], "utm_source": ["mail"]}, SCHEMAS["attention"], CTX)
    assert decoded == {"layer": 7}
    assert len(notes) == 1 and "2 times" in notes[0]
    decoded, notes = decode({"layer": ["4", "4"]}, SCHEMAS["attention"], CTX)
    assert decoded == {"layer": 4} and notes == []               # the same value twice is no conflict


def test_long_text_is_cut_and_too_long_for_a_link():
    long = "word " * 3000                                          # 15,000 characters
    decoded, notes = decode({"text": [long]}, SCHEMAS["attention"], CTX)
    assert len(decoded["text"]) == TEXT.max_chars and "cut" in notes[0]
    huge = "数" * 7000                                              # fits max_chars, not the URL limit (9 bytes each)
    assert "text" not in encode({"text": huge}, SCHEMAS["attention"], CTX)
    assert encode({"text": "数" * 10}, SCHEMAS["attention"], CTX) == {"text": "数" * 10}


def test_query_token_default_is_the_last_token_of_the_text():
    schema = SCHEMAS["attention"]
    assert encode({"attention_view": "query", "q": 39}, schema, CTX) == {"view": "query"}
    assert encode({"attention_view": "query", "q": 12}, schema, CTX) == {"view": "query", "q": "12"}
    fixed, _ = clamp({"q": 39}, schema, Context(n_layers=30, n_heads=9, n_tokens=10))   # a shorter text now
    assert fixed == {"q": 9}


def test_parameters_link_names_a_preset_or_the_edited_fields():
    schema = SCHEMAS["parameters"]
    assert encode({"params_preset": "Mistral-7B", "params_d_model": 4096}, schema, CTX) == {"preset": "Mistral-7B"}
    custom = encode({"params_preset": "custom", "params_d_model": 640, "params_n_layers": 30}, schema, CTX)
    assert custom == {"preset": "custom", "d": "640"}                 # 30 layers is the default preset's: left out


def test_schemas_are_well_formed():
    for page, schema in SCHEMAS.items():
        assert schema.page == page
        assert schema.by_name("present") is not None                      # presenter mode on every page
        for p in schema.params:
            if isinstance(p, Choice):
                assert p.default in p.options or (p.default is None and p.name == "lang")   # the browser's


def test_codec_imports_no_streamlit():
    code = ("import sys, app_core.link, app_core.schemas; print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("raw", ["../../etc/passwd", "/etc/passwd", "https://example.org/m.gguf", "a/b", "a\\b",
                                 "C:model", ".hidden", "x" * 201, "tab\tname"])
def test_a_model_link_never_names_a_path(raw):
    values, notes = decode({"model": raw}, SCHEMAS["attention"], Context())
    assert "model" not in values and notes and "never a path" in notes[0]
    assert decode({"model": "Qwen3-0.6B-Q8_0"}, SCHEMAS["attention"], Context())[0] == {"model": "Qwen3-0.6B-Q8_0"}
