"""model.files.catalog: a picker's facts from a file's metadata, the loader's reason for a file it cannot load."""
from pathlib import Path

import pytest

from harness.tiny_gguf import Tiny, write_tiny
from model import load_model
from model.files.catalog import describe, list_models, memory_needed
from model.native import int8_linear


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    write_tiny(folder / "tiny-gpt2.gguf", Tiny(arch="gpt2", quant="Q8_0", tied=False, n_layers=3))
    (folder / "broken.gguf").write_bytes(b"GGUF" + bytes(40))
    (folder / "notes.txt").write_text("not a model")
    return folder


def test_a_readable_file_is_described_without_loading(folder):
    info = describe(folder / "tiny-gpt2.gguf")
    lm = load_model(folder / "tiny-gpt2.gguf")
    assert info.ok and info.name == "tiny-gpt2" and info.architecture == "gpt2" and info.quantization == "Q8_0"
    assert info.n_params == sum(lm.tensor_sizes.values()) and (info.n_layers, info.n_heads) == (3, 4)
    assert info.file_bytes == (folder / "tiny-gpt2.gguf").stat().st_size


@pytest.mark.skipif(not int8_linear.available(), reason="the int8 layout's size is the native kernel's")
def test_memory_counts_float32_for_a_small_model_the_steps_int8_copy_and_its_q8_table(folder):
    """Every tensor float32 but the Q8_0 embedding table and LM head (untied here), which stay Q8_0 in the int8
    kernel's layout; every other Q8_0 matrix (float32 when loaded) adds the generation step's int8 copy in that
    layout."""
    import gguf

    tensors = gguf.GGUFReader(folder / "tiny-gpt2.gguf").tensors
    tables = [t for t in tensors if t.name in ("token_embd.weight", "output.weight")]
    assert len(tables) == 2 and all(t.tensor_type.name == "Q8_0" for t in tables)
    q8_matrices = [(int(t.shape[1]), int(t.shape[0])) for t in tensors   # [rows, columns]
                   if t.tensor_type.name == "Q8_0" and len(t.shape) == 2 and t.name != "position_embd.weight"]
    assert len(q8_matrices) > 1                                         # quantized in the file, float32 when loaded
    held = [-(-rows // 16) * 16 * columns for rows, columns in q8_matrices]   # rows padded to groups of 16
    int8_layout = [n + n // 32 * 4 for n in held]                       # an int8 a value, a float32 scale per 32
    floats = 4 * sum(int(t.n_elements) for t in tensors if t.name not in ("token_embd.weight", "output.weight"))
    assert memory_needed(tensors) == floats + sum(int8_layout)          # a table: its int8 layout alone


def test_a_folder_lists_every_gguf_with_the_reason_for_a_broken_one(folder):
    infos = {info.name: info for info in list_models(folder)}
    assert set(infos) == {"tiny-gpt2", "broken"}
    assert not infos["broken"].ok and "broken.gguf" in infos["broken"].error
    assert describe(folder / "gone.gguf").error and list_models(folder / "missing") == []
