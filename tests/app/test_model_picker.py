"""The Model picker: every page and view with a tiny model of each architecture (an encoder and an encoder-decoder
too: a view they cannot show says what they can, with links), the model in the link, hostile links, broken and
vanishing files, uploads over the limit, two sessions loading one model at once."""
from __future__ import annotations

import threading

import pytest

from app_core import families
from app_core import models_folder as models
from app_core import schemas as S
from app_pages.frame import session as caches
from harness.apptest import figures, go_to, open_page, rerun, warnings
from tests.app.encoders_folder import BERT, T5
from tests.app.encoders_folder import SHAPES as ENCODER_SHAPES
from tests.app.models_folder import SHAPES

VIEWS = {  # page -> (its view setting's state key, the views)
    "attention": ("attention_view", tuple(S.ATTENTION_VIEWS)),
    "causal-mask": ("mask_view", tuple(S.MASK_VIEWS)),
    "softmax": ("softmax_source", tuple(S.SOFTMAX_SOURCES)),
    "generate": ("generate_view", tuple(S.GENERATE_VIEWS)),
    "inside": ("inside_view", tuple(S.INSIDE_VIEWS)),
    "positional": ("positional_view", tuple(S.POSITIONAL_VIEWS)),
    "efficient": ("efficient_view", tuple(S.EFFICIENT_VIEWS)),
    "parameters": ("params_preset", (S.DEFAULT_PRESET, S.LOADED)),
}
TEXT = "The cat sat on the mat. The cat sat on the mat again, 12 times."


def model_of(at) -> str | None:
    """The session's model setting (None: the built-in model)."""
    return at.session_state[S.MODEL.key] if S.MODEL.key in at.session_state else None


def slider_max(at, key: str) -> int | None:
    found = [s for s in at.slider if s.key == key]
    return found[0].max if found else None


@pytest.mark.parametrize("name", list(SHAPES))
def test_every_page_and_view_with_each_architecture(models_dir, name):
    tiny = SHAPES[name]
    at = open_page("attention", model=name, text=TEXT, layer="29", head="8")
    assert model_of(at) == name
    assert at.session_state[S.LAYER.key] == tiny.n_layers - 1 and at.session_state[S.HEAD.key] == tiny.n_heads - 1
    assert slider_max(at, S.LAYER.key) == tiny.n_layers - 1 and slider_max(at, S.HEAD.key) == tiny.n_heads - 1
    for page, (key, views) in VIEWS.items():
        go_to(at, page)
        for view in views:
            if key is not None:
                at.session_state[key] = view
            rerun(at)
            assert at.query_params.get(S.MODEL.name) == name, (page, view)
            assert not at.error, (page, view, [e.value for e in at.error])
    assert at.session_state["params_d_model"] == tiny.d_model and "They match exactly" in at.success[0].value


ENCODER_VIEWS = {**VIEWS, "circuits": ("circuits_view", tuple(S.CIRCUITS_VIEWS)), "train": (None, (None,)),
                 "lessons": (None, (None,))}
CHARTLESS = {("lessons", None), ("train", None)}    # no chart, or one waiting for a run, with any model


@pytest.mark.parametrize("name", [BERT, T5])
def test_every_page_and_view_with_an_encoder_and_an_encoder_decoder(encoders_dir, name):
    """No exception or error anywhere; a view the family can show draws charts that hold data; one it cannot shows
    one note on what the family is, with links to views that work."""
    tiny = ENCODER_SHAPES[name]
    family = families.ENCODER if name == BERT else families.SEQ2SEQ
    at = open_page("attention", model=name, text=TEXT, layer="29", head="8")
    assert (at.session_state[S.LAYER.key], at.session_state[S.HEAD.key]) == (tiny.n_layers - 1, tiny.n_heads - 1)
    shown = guarded = 0
    for page, (key, views) in ENCODER_VIEWS.items():
        go_to(at, page)
        for view in views:
            if key is not None:
                at.session_state[key] = view
            rerun(at)
            where = (page, view, name)
            assert at.query_params.get(S.MODEL.name) == name, where
            assert not at.error, (where, [e.value for e in at.error])
            if families.supports(page, view, family):
                shown += 1
                if (page, view) not in CHARTLESS:
                    charts = figures(at)
                    assert charts and all(f["data"] for f in charts), where
            else:
                guarded += 1
                notes = " ".join(i.value for i in at.info).replace("\\", "")
                assert name in notes and families.FAMILY_NAMES[family].split("-")[0] in notes, where
                links = [b for b in at.button if b.key and b.key.startswith("w_family_")]
                assert links and not figures(at), where
    assert shown >= 12 and guarded >= 8, (shown, guarded)
    go_to(at, "parameters")
    at.session_state[S.PARAMETERS.by_name("family").key] = S.LOADED
    rerun(at)
    assert any(f"{name}: the calculator says" in s.value and "They match exactly" in s.value for s in at.success)


def test_a_family_notes_link_opens_a_view_that_works(encoders_dir):
    at = open_page("inside", model=BERT, text=TEXT, view="lens")
    links = [b for b in at.button if b.key and b.key.startswith("w_family_")]
    assert [b.key for b in links][:2] == ["w_family_attention_head", "w_family_causal-mask_compare"]
    links[1].click()
    rerun(at)
    assert at.session_state["mask_view"] == "compare" and len(figures(at)) == 2
    assert at.query_params["view"] == "compare" and at.query_params[S.MODEL.name] == BERT


def test_the_link_reopens_the_model_and_picking_another_clamps_layer_and_head(models_dir):
    at = open_page("attention", model="tiny-qwen3", text=TEXT, layer="3", head="3")
    assert at.query_params[S.MODEL.name] == "tiny-qwen3" and at.session_state[S.LAYER.key] == 3
    options = at.selectbox(key="w_model").options
    at.selectbox(key="w_model").select_index(1 + sorted(SHAPES).index("tiny-qwen2"))
    rerun(at)
    assert at.session_state[S.MODEL.key] == "tiny-qwen2" and at.query_params[S.MODEL.name] == "tiny-qwen2"
    assert (at.session_state[S.LAYER.key], at.session_state[S.HEAD.key]) == (1, 1)
    assert "layer=3 is outside 0–1: using 1." in warnings(at)
    assert any("tiny-qwen2 · qwen2 ·" in o and "parameters · Q8_0 ·" in o for o in options)
    at.selectbox(key="w_model").select_index(0)                     # the built-in model: no parameter
    rerun(at)
    assert S.MODEL.name not in at.query_params and at.session_state[S.LAYER.key] == 1
    picker = at.selectbox(key="w_model")                             # shown selected (not as an empty picker)
    assert picker.index == 0 and picker.options[0].startswith("SmolLM2-135M-Instruct"), picker.options[0]


@pytest.mark.parametrize("hostile", ["../../etc/passwd", "/etc/passwd", "https://example.org/x.gguf",
                                     "sub/tiny-llama", "..\\tiny-llama", "C:tiny-llama", ".tiny-llama", "nosuch"])
def test_a_hostile_or_unknown_model_link_opens_the_default_model_with_a_note(models_dir, hostile):
    at = open_page("attention", model=hostile, text=TEXT)
    assert model_of(at) is None and S.MODEL.name not in at.query_params
    assert "model" in warnings(at)
    assert all(key[0] != hostile for key in models.pool().keys())


def test_a_broken_file_is_listed_with_its_reason_and_a_vanished_one_gives_way(tiny_models, tmp_path, monkeypatch):
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + bytes(40))
    (tmp_path / "passing.gguf").write_bytes((tiny_models / "tiny-llama.gguf").read_bytes())
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))
    at = open_page("attention", text=TEXT)
    captions = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")
    assert "broken.gguf: cannot be used. broken.gguf is not a readable GGUF file" in captions
    options = at.selectbox(key="w_model").options                   # built-in + passing + the two demo models
    assert len(options) == 4 and "built-in tiny T5 (trained to reverse)" in options[-2], options
    (tmp_path / "passing.gguf").unlink()                             # gone after it was listed
    at.selectbox(key="w_model").select_index(1)
    rerun(at)
    assert model_of(at) is None
    assert "This server has no model named passing" in warnings(at)


def test_crafted_files_in_the_folder_are_listed_as_refused_with_their_reason(tiny_models, tmp_path, monkeypatch):
    from harness.crafted_gguf import write_attack, write_good

    good = write_good(tmp_path / "good.gguf")
    said = {"int32_4M": "declares general.junk with 4,000,000 items; this app reads at most 1,048,576 there",
            "nested_100k": "declares general.junk as an array of arrays",
            "vocab_1.5M": "declares tokenizer.ggml.tokens with 1,500,000 items",
            "keys_past_end": "is truncated or damaged: it declares 18,446,744,073,709,551,615 metadata keys"}
    for name in said:
        write_attack(name, good, tmp_path)
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path))
    at = open_page("attention", text=TEXT)
    captions = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")
    for name, reason in said.items():
        assert f"{name}.gguf: cannot be used. {name}.gguf {reason}" in captions, (name, captions)
    assert len(at.selectbox(key="w_model").options) == 4              # the built-in model, good and the two demos


def test_an_upload_over_the_limit_is_refused(models_dir, monkeypatch):
    from app_pages.frame import controls

    class Upload:
        name, size = "big.gguf", 3 * 2**20

        def getvalue(self):
            raise AssertionError("an upload over the limit must not be read")

    monkeypatch.setenv("ATLAS_MAX_UPLOAD_MB", "2")
    state = {controls.UPLOAD: Upload()}
    monkeypatch.setattr(controls.st, "session_state", state)
    controls._save_upload()
    assert "more than this server accepts" in state[controls.UPLOAD_NOTE] and not (models_dir / "big.gguf").exists()
    monkeypatch.setenv("ATLAS_ALLOW_UPLOAD", "0")
    at = open_page("attention", text=TEXT)
    assert not at.get("file_uploader")


def test_two_sessions_loading_one_model_at_once_load_it_once(models_dir):
    pool = models.pool()
    loads = pool.loads
    info = models.resolve("tiny-gpt2")
    key = models.identity(info.path)
    with pool._lock:
        pool._models.pop(key, None)                                   # not loaded yet
    results = []
    threads = [threading.Thread(target=lambda: results.append(caches.load_shared_model(info))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pool.loads == loads + 1 and len(results) == 2 and results[0] is results[1]
