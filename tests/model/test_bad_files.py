"""Every kind of bad model file gives one ModelLoadError whose message says what is wrong, and nothing else.

The files are tiny valid GGUFs (harness/tiny_gguf.py) damaged one way each: cut, patched in their header, written
with a missing / extra / wrong-shaped tensor, an unknown architecture, pre-tokenizer, tensor type or a metadata value
that changes the maths.
"""
import subprocess
import sys

import gguf
import numpy as np
import pytest

from harness.tiny_gguf import Tiny, smollm_vocab, write_tiny
from model import ModelLoadError, load_model


@pytest.fixture(scope="module")
def vocab():
    return smollm_vocab(2000)


@pytest.fixture(scope="module")
def good(tmp_path_factory, vocab):
    path = tmp_path_factory.mktemp("bad_files") / "good.gguf"
    write_tiny(path, Tiny(arch="qwen3"), vocab)
    return path


def tensor_field(path, name: str):
    """(byte offset of the tensor's dims, n_dims, byte offset of its type) in the file's tensor-info header."""
    reader = gguf.GGUFReader(path)
    tensor = next(t for t in reader.tensors if t.name == name)
    _, _, n_dims, dims, raw_type, _ = tensor.field.parts
    base = reader.data.ctypes.data
    return dims.ctypes.data - base, int(n_dims[0]), raw_type.ctypes.data - base


def patched(good, tmp_path, name: str, offset: int, data: bytes):
    path = tmp_path / name
    raw = bytearray(good.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))
    return path


def test_the_good_file_loads(good):
    assert load_model(path=good).config.architecture == "qwen3"


def test_empty_file(tmp_path):
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"empty \(0 bytes\)"):
        load_model(path=tmp_path / "empty.gguf")


def test_not_a_gguf_file(tmp_path):
    (tmp_path / "page.gguf").write_text("<html>404 Not Found</html>")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        load_model(path=tmp_path / "page.gguf")


@pytest.mark.parametrize("fraction", [0.001, 0.3, 0.99])
def test_truncated_file(good, tmp_path, fraction):
    data = good.read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:max(8, int(len(data) * fraction))])
    with pytest.raises(ModelLoadError, match="truncated"):
        load_model(path=path)


def test_tensor_data_past_the_end(good, tmp_path):
    reader = gguf.GGUFReader(good)
    tensor = next(t for t in reader.tensors if t.name == "blk.1.ffn_down.weight")
    offset_part = tensor.field.parts[-1]
    at = offset_part.ctypes.data - reader.data.ctypes.data
    path = patched(good, tmp_path, "past.gguf", at, np.uint64(good.stat().st_size * 2).tobytes())
    with pytest.raises(ModelLoadError, match="past its end|truncated"):
        load_model(path=path)


def test_absurd_declared_shape_is_refused_before_allocating(good, tmp_path):
    """token_embd declared with 10^9 rows: refused from the header, the process stays small."""
    dims_at, _, _ = tensor_field(good, "token_embd.weight")
    path = patched(good, tmp_path, "huge.gguf", dims_at + 8, np.uint64(10**9).tobytes())
    # VmHWM: this process's own peak (ru_maxrss also counts the parent's pages the child had before exec).
    probe = ("import re\nfrom pathlib import Path\nfrom model import load_model, ModelLoadError\n"
             f"try:\n    load_model(path={str(path)!r})\nexcept ModelLoadError as e:\n    print('ERR', e)\n"
             "peak = re.search(r'VmHWM:\\s+(\\d+) kB', Path('/proc/self/status').read_text())\n"
             "print('RSS_MB', int(peak.group(1)) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120).stdout
    assert "ERR" in out and ("past its end" in out or "truncated" in out), out
    assert int(out.split("RSS_MB")[1]) < 800, out     # torch and the tokenizer are ~400 MB; no 64 GB table


def test_unknown_tensor_type(good, tmp_path):
    _, _, type_at = tensor_field(good, "blk.0.ffn_up.weight")
    path = patched(good, tmp_path, "type.gguf", type_at, np.uint32(200).tobytes())
    with pytest.raises(ModelLoadError, match="type this app cannot read.*Q4_K"):
        load_model(path=path)


@pytest.mark.parametrize(("case", "tiny", "message"), [
    ("unknown_architecture", None, r"'mamba' model; .*llama, qwen2, qwen3, gpt2"),
    ("missing_tensor", None, r"lacks the tensors blk\.1\.attn_k_norm\.weight"),
    ("extra_tensor", Tiny(arch="qwen3", extra_tensors={"blk.0.attn_q.bias": np.zeros(64, np.float32)}),
     r"does not use: blk\.0\.attn_q\.bias"),
    ("shape_mismatch", Tiny(arch="qwen3", metadata={"add_feed_forward_length": 96}), r"shapes do not match"),
    ("sliding_window", Tiny(arch="qwen3", metadata={"add_sliding_window": 64}), r"sliding_window = 64"),
    ("rope_scaling", Tiny(arch="qwen2", metadata={"add_rope_scaling_type": gguf.RopeScalingType.YARN}),
     r"rope\.scaling\.type = 'yarn'"),
    ("unknown_pre_tokenizer", None, r"pre-tokenizer 'mystery'"),
])
def test_files_the_engine_does_not_fully_understand_are_refused(tmp_path, vocab, good, case, tiny, message):
    path = tmp_path / f"{case}.gguf"
    if tiny is not None:
        write_tiny(path, tiny, vocab)
    else:
        rewrite(good, path, case)
    with pytest.raises(ModelLoadError, match=message):
        load_model(path=path)


def rewrite(good, path, case: str) -> None:
    """Copy good into path through GGUFWriter, changing one thing."""
    reader = gguf.GGUFReader(good)
    arch = "mamba" if case == "unknown_architecture" else "qwen3"
    writer = gguf.GGUFWriter(str(path), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = "mystery" if (case == "unknown_pre_tokenizer" and key == "tokenizer.ggml.pre") else field.contents()
        if key.startswith("qwen3.") and arch == "mamba":
            key = "mamba." + key.removeprefix("qwen3.")
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, kind, sub_type=sub)
    for tensor in reader.tensors:
        if case == "missing_tensor" and tensor.name == "blk.1.attn_k_norm.weight":
            continue
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_shape=np.array(tensor.data).shape,
                          raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
