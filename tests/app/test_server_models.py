"""Models a server fetches: ATLAS_DEFAULT_MODEL (fetched from the Hub at start, used by every link without ?model=,
the built-in model with the reason when it cannot be had), the picker's download box behind ATLAS_ALLOW_DOWNLOAD=1,
and the picker's help, which names the models folder's path only where visitors may add models. The Hub is a local
server answering as huggingface.co does (tests/fake_hub.py), reached through HF_ENDPOINT."""
from __future__ import annotations

import pytest

from app_core import default_model as dm
from app_core import models_folder as models
from app_core import schemas as S
from app_core.examples import default_text
from app_pages.frame import session as caches
from harness.apptest import open_page, rerun, warnings
from tests.app.models_folder import SHAPES
from tests.fake_hub import FakeHub

REPO = "atlas-test/Tiny-Qwen3-GGUF"
FILE = "hub-qwen3.gguf"
TEXT = "The cat sat on the mat."
BUILTIN_LAYERS = 30


@pytest.fixture
def hub(tiny_models, tmp_path, monkeypatch):
    """The fake Hub serving tiny-qwen3 as FILE; an empty models folder; no default model remembered."""
    with FakeHub() as server:
        server.add(REPO, FILE, (tiny_models / "tiny-qwen3.gguf").read_bytes())
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("ATLAS_MODELS_DIR", str(tmp_path / "models"))
        monkeypatch.setattr(dm, "_CURRENT", {})
        yield server


def layer_max(at) -> int:
    return next(s.max for s in at.slider if s.key == S.LAYER.key)


def test_the_default_model_is_fetched_and_opens_every_link_without_a_model(hub, tmp_path, monkeypatch):
    monkeypatch.setenv(dm.ENV, f"{REPO}:{FILE}")
    at = open_page("attention", text=TEXT)
    assert layer_max(at) == SHAPES["tiny-qwen3"].n_layers - 1
    assert S.MODEL.name not in at.query_params and not warnings(at)
    assert (tmp_path / "models" / FILE).is_file()
    picker = at.selectbox(key="w_model")
    assert picker.index == 0 and picker.options[0].startswith("hub-qwen3 (this server's default) · qwen3 ·")
    assert any(o.startswith("SmolLM2-135M-Instruct.Q4_1 (built-in)") for o in picker.options)
    picker.select_index(1)                                  # the built-in model, named in the link
    rerun(at)
    assert at.query_params[S.MODEL.name] == "SmolLM2-135M-Instruct.Q4_1" and layer_max(at) == BUILTIN_LAYERS - 1
    again = open_page("attention", text=TEXT, model="SmolLM2-135M-Instruct.Q4_1")
    assert layer_max(again) == BUILTIN_LAYERS - 1 and not warnings(again)
    heads = [request for request in hub.requests if request[0] == "HEAD"]
    assert len(heads) == 1                                  # fetched once for the process, not per session


def test_a_default_model_that_cannot_be_fetched_gives_the_built_in_one_and_says_why(hub, monkeypatch):
    monkeypatch.setenv(dm.ENV, f"{REPO}:missing.gguf")
    at = open_page("attention", text=TEXT)
    assert layer_max(at) == BUILTIN_LAYERS - 1
    said = warnings(at)
    assert f"This server's default model ({REPO}:missing.gguf) could not be used" in said
    assert "has no file 'missing.gguf'" in said and "Showing the built-in model instead." in said
    assert at.selectbox(key="w_model").options[0].startswith("SmolLM2-135M-Instruct.Q4_1 (built-in)")
    assert S.MODEL.name not in at.query_params


def test_a_default_model_named_by_its_file_in_the_models_folder(models_dir, monkeypatch):
    monkeypatch.setattr(dm, "_CURRENT", {})
    monkeypatch.setenv(dm.ENV, "tiny-llama.gguf")
    at = open_page("attention", text=TEXT)
    assert layer_max(at) == SHAPES["tiny-llama"].n_layers - 1 and not warnings(at)
    monkeypatch.setenv(dm.ENV, "no-such-model")
    at = open_page("attention", text=TEXT)
    assert layer_max(at) == BUILTIN_LAYERS - 1 and "there is no no-such-model.gguf in the models folder" in warnings(at)


def test_a_page_shows_a_progress_bar_while_the_default_model_comes(hub, monkeypatch):
    from app_pages.frame import default_model

    monkeypatch.setenv(dm.ENV, f"{REPO}:{FILE}")
    hub.delay_s = 1.0                                               # still coming when the page asks for it
    bars = []
    real_progress = default_model.st.progress
    monkeypatch.setattr(default_model.st, "progress", lambda value, text=None: bars.append(text) or
                        real_progress(value, text=text))
    at = open_page("attention", text=TEXT)
    assert bars and bars[0] == f"Fetching this server's default model {REPO}:{FILE} (first start only)…"
    assert layer_max(at) == SHAPES["tiny-qwen3"].n_layers - 1 and not at.get("progress")     # gone once it came


def test_the_default_model_reports_progress_while_it_comes(hub, monkeypatch):
    monkeypatch.setenv(dm.ENV, f"{REPO}:{FILE}")
    seen: list[dm.Status] = []
    status = dm.poll(dm.current(), seen.append, interval_s=0.001)
    assert seen and seen[0].state == dm.FETCHING and status.state == dm.READY and status.name == "hub-qwen3"
    assert all(a.fraction <= b.fraction for a, b in zip(seen, seen[1:], strict=False))


@pytest.mark.parametrize("raw", ["Qwen/Qwen3-0.6B-GGUF", "a/b/c:x.gguf", ":x.gguf", "../x.gguf", "Qwen/x:"])
def test_a_malformed_default_model_setting_is_refused(raw):
    with pytest.raises(ValueError, match="neither REPO_ID:FILENAME"):
        dm.parse(raw)


def test_the_warm_up_fetches_and_loads_the_default_model_at_server_start(hub, tmp_path, monkeypatch):
    from app_pages.frame import warmup

    monkeypatch.setenv(dm.ENV, f"{REPO}:{FILE}")
    monkeypatch.setattr(warmup, "freeze_long_lived", lambda: None)    # keep the test process's collector as it is
    warmup.warm_up()
    path = tmp_path / "models" / FILE
    assert models.identity(path) in models.pool().keys()
    context = SHAPES["tiny-qwen3"].context
    assert (models.identity(path), default_text(), min(context, caches.DEFAULT_MAX_TOKENS)) in caches.caches()["traces"]


def test_the_download_box_is_hidden_unless_the_server_allows_downloads(hub, monkeypatch):
    monkeypatch.delenv("ATLAS_ALLOW_DOWNLOAD", raising=False)
    at = open_page("attention", text=TEXT)
    assert not [w for w in at.text_input if w.key == "w_download_repo"]


def test_the_download_box_fetches_a_model_and_opens_it(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_ALLOW_DOWNLOAD", "1")
    at = open_page("attention", text=TEXT)
    at.selectbox(key="w_download_suggest").select_index(0)
    rerun(at)
    assert (at.text_input(key="w_download_repo").value, at.text_input(key="w_download_file").value) == \
        ("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf")
    at.text_input(key="w_download_repo").set_value(REPO)
    at.text_input(key="w_download_file").set_value(FILE)
    at.button(key="w_download_go").click()
    rerun(at)
    assert at.session_state[S.MODEL.key] == "hub-qwen3" and dict(at.query_params) == {
        **{k: v for k, v in at.query_params.items() if k != S.MODEL.name}, S.MODEL.name: "hub-qwen3"}
    assert layer_max(at) == SHAPES["tiny-qwen3"].n_layers - 1
    assert not any("download" in key for key in at.query_params)
    assert (tmp_path / "models" / FILE).is_file()


@pytest.mark.parametrize("case", ["too large", "missing"])
def test_the_download_box_refuses_with_a_reason_and_writes_nothing(hub, tmp_path, monkeypatch, case):
    monkeypatch.setenv("ATLAS_ALLOW_DOWNLOAD", "1")
    at = open_page("attention", text=TEXT)                      # (the built-in model loaded within the budget)
    if case == "too large":
        monkeypatch.setenv("ATLAS_MODEL_MEMORY_MB", "0.01")         # 10 KB: less than the tiny model's file
    at.text_input(key="w_download_repo").set_value(REPO)
    at.text_input(key="w_download_file").set_value(FILE if case == "too large" else "missing.gguf")
    rerun(at)                                                   # typed in: the button is enabled
    at.button(key="w_download_go").click()
    rerun(at)
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert ("more than this server's memory budget for models" in said if case == "too large" else
            "The download failed:" in said and "has no file 'missing.gguf'" in said), said
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
    assert not [b for b in hub.requests if b[1].startswith("/blobs/")]
    assert S.MODEL.name not in at.query_params


@pytest.mark.parametrize(("lang", "no_path", "with_path"), [
    ("en", "in the server's models folder.", "in this server's models folder ("),
    ("zh", "服务器模型文件夹", "服务器模型文件夹（"),
])
def test_the_pickers_help_names_the_folders_path_only_where_visitors_may_add_models(models_dir, monkeypatch, lang,
                                                                                      no_path, with_path):
    monkeypatch.setattr(dm, "_CURRENT", {})
    monkeypatch.setenv("ATLAS_ALLOW_UPLOAD", "0")
    at = open_page("attention", text=TEXT, lang=lang)
    help_text = at.selectbox(key="w_model").help
    assert no_path in help_text and str(models_dir) not in help_text
    monkeypatch.setenv("ATLAS_ALLOW_UPLOAD", "1")
    at = open_page("attention", text=TEXT, lang=lang)
    help_text = at.selectbox(key="w_model").help
    assert with_path in help_text and str(models_dir) in help_text


def test_the_download_box_reads_in_chinese(hub, monkeypatch):
    from tests.app.i18n_check import english_runs, page_strings

    monkeypatch.setenv("ATLAS_ALLOW_DOWNLOAD", "1")
    at = open_page("attention", text="猫坐在垫子上。", lang="zh")
    box = [s for s in page_strings(at) if "Hugging Face" in s or "推荐" in s or "仓库" in s or "Hub" in s]
    assert len(box) >= 4 and not [run for text in box for run in english_runs(text)], box


def test_the_default_model_is_used_only_while_it_matches_the_sha256_recorded_when_it_was_fetched(hub, tiny_models,
                                                                                               tmp_path, monkeypatch):
    """Each DefaultModel is one server start. A start with the file as fetched uses it without asking the Hub; a
    file replaced on disk (another model under its name) is not used while the Hub cannot be asked, and is fetched
    again when it can; named by its file name, a changed file is refused."""
    raw, path = f"{REPO}:{FILE}", tmp_path / "models" / FILE
    assert dm.DefaultModel(raw).wait(60).state == dm.READY
    fetched = path.read_bytes()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert dm.DefaultModel(raw).wait(60).state == dm.READY                   # the Hub not asked
    path.write_bytes((tiny_models / "tiny-llama.gguf").read_bytes())
    status = dm.DefaultModel(raw).wait(60)
    assert status.state == dm.FAILED, status
    assert f"{FILE} does not match the sha256 recorded when it was fetched from {REPO}/{FILE}" in status.error
    assert "so it was not used" in status.error and "HF_HUB_OFFLINE is set" in status.error
    named = dm.DefaultModel(FILE).wait(60)
    assert named.state == dm.FAILED and "does not match the sha256 recorded" in named.error, named
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert dm.DefaultModel(raw).wait(60).state == dm.READY and path.read_bytes() == fetched
    assert dm.DefaultModel(FILE).wait(60).state == dm.READY
