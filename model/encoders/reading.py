"""Read, check and dequantize a `bert` or `t5` GGUF with the decoders' reader (model.files.gguf), as strictly:
unknown metadata of the architecture, extra or missing tensors, wrong shapes, a vocabulary that does not fit the
embedding table, and a model larger than the memory available are refused with a ModelLoadError saying what to do,
before anything large is allocated. Every tensor becomes float32 (torch layout [out, in]).

A T5's LM head: transformers scales a tied T5's decoder output by d_model**-0.5 (the original T5, whose head is its
embedding table) and not an untied one's (T5 v1.1, Flan-T5). A GGUF does not say which, and llama.cpp's converter
writes the head of both (llama.cpp never scales); so a head with the embedding table's values (the same values, or
within the difference two quantizations of them make) is taken as tied, and the file's model as the original T5's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from model.encoders.config import BertConfig, T5Config
from model.encoders.layouts import KNOWN_KEYS, bert_config, bert_tensor_shapes, t5_config, t5_tensor_shapes
from model.errors import ModelLoadError
from model.files import gguf as G
from model.files.heap import release_mapped
from model.files.quants import dequantize
from model.tokenizers.from_gguf import build_tokenizer

SAME_TABLE = 0.5   # |head - embedding| / |embedding| below this: one table (two quantizations differ by < 0.3)


@dataclass(frozen=True)
class EncoderFile:
    """Everything read from a bert / t5 GGUF."""

    path: Path
    config: BertConfig | T5Config
    weights: dict[str, torch.Tensor]    # GGUF tensor name -> float32 [out, in] / [D]
    tensor_sizes: dict[str, int]        # GGUF tensor name -> number of parameters (as in the file)
    tokenizer: object                   # model.tokenizers.wordpiece / unigram


def read_encoder_gguf(path: str | os.PathLike) -> EncoderFile:
    """Read, check and dequantize a bert / t5 GGUF; any problem becomes one ModelLoadError that says what to do."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"Model file not found: {path}. Pass the path of a .gguf file.")
    reader, config = inspect(path)
    try:
        _check_memory(reader, path)
        tokenizer = _tokenizer(reader, path)
        weights = _dequantize_all(reader)
        if config.architecture == "t5":
            tied = "output.weight" not in weights or same_table(weights["output.weight"], weights["token_embd.weight"])
            if tied:
                weights.pop("output.weight", None)
            config = replace(config, tied_embeddings=tied, scale_decoder_output=tied)
    except ModelLoadError:
        raise
    except Exception as exc:
        raise G._corrupt(path, exc) from exc
    return EncoderFile(path, config, weights, {t.name: int(t.n_elements) for t in reader.tensors}, tokenizer)


def inspect(path: Path):
    """(reader, config) of a bert / t5 file whose metadata and tensors pass every check (nothing dequantized, the
    vocabulary not read: the model picker's look at a file). A T5's config says tied until the head is compared."""
    reader = open_checked(path)
    try:
        arch = G._field(reader, "general.architecture")
        if arch not in KNOWN_KEYS:
            raise ModelLoadError(f"{path.name} is a '{arch}' model, not an encoder this app reads (bert, t5).")
        config, expected = _config(reader, path, arch)
        G.check_tensors(reader, path, expected, arch, "model", config.vocab_size)
    except ModelLoadError:
        raise
    except Exception as exc:
        raise G._corrupt(path, exc) from exc
    return reader, config


def open_checked(path: Path):
    """The file's reader (model.files.gguf's, within its limits), its completeness checked."""
    reader = G.open_reader(path)
    G._check_complete(reader, path)
    return reader


def _config(reader, path: Path, arch: str) -> tuple[BertConfig | T5Config, dict[str, tuple[int, ...]]]:
    """The config and the tensors it needs; unknown metadata of the architecture refused."""
    unknown = [f"{key} = {G._field(reader, key)!r}" for key in reader.fields
               if key.startswith(f"{arch}.") and key.removeprefix(f"{arch}.") not in KNOWN_KEYS[arch]]
    if unknown:
        raise ModelLoadError(f"{path.name} sets {', '.join(unknown[:6])}: this app does not support that (it "
                             f"computes a plain {arch} model, so its results would be wrong).")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise ModelLoadError(f"{path.name} has no vocabulary (tokenizer.ggml.tokens); it is not a complete GGUF.")
    label = path.stem.replace(".", " · ")
    names = {t.name for t in reader.tensors}
    table = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    n_tokens = int(table.shape[-1]) if table is not None and len(table.shape) == 2 else len(tokens.data)
    try:
        if arch == "bert":
            count = G._field(reader, "tokenizer.ggml.token_type_count")
            types = next((t for t in reader.tensors if t.name == "token_types.weight"), None)
            n_types = int(count) if count is not None else int(types.shape[-1]) if types is not None else 1
            config = bert_config(lambda key: G._field(reader, f"bert.{key}"), n_types, n_tokens, label)
            return config, bert_tensor_shapes(config)
        config = t5_config(lambda key: G._field(reader, f"t5.{key}"), names, n_tokens, label, tied=False)
        return config, t5_tensor_shapes(config, "output.weight" in names)
    except ValueError as exc:
        raise ModelLoadError(f"{path.name} {exc}.") from exc


def memory_needed(tensors) -> int:
    """Bytes the loaded weights take: every tensor as float32."""
    return G.float32_bytes(tensors)


def _check_memory(reader, path: Path) -> None:
    need, available = memory_needed(reader.tensors), G.available_memory_bytes()
    if available is not None and need > G.MEMORY_HEADROOM * available:
        raise ModelLoadError(f"{path.name} needs {need / 2**30:,.1f} GB of memory for its weights, and this machine "
                             f"has {available / 2**30:,.1f} GB available. Use a smaller model.")


def tokenizer_metadata(reader) -> dict[str, object]:
    """Every tokenizer.ggml.* value as the reader's contents(): strings, lists of strings or numbers."""
    return {key: field.contents() for key, field in reader.fields.items() if key.startswith("tokenizer.ggml.")}


def _tokenizer(reader, path: Path):
    try:
        return build_tokenizer(tokenizer_metadata(reader), path.stem)
    except ValueError as exc:
        raise ModelLoadError(f"{path.name}: {exc}. This app cannot tokenize text exactly as the model expects, so "
                             f"it does not load it.") from exc


def _dequantize_all(reader) -> dict[str, torch.Tensor]:
    """Every tensor as float32 [out, in] / [D]; each tensor's pages of the file mapping dropped once copied."""
    native = reader.byte_order != "S"
    weights = {}
    for tensor in reader.tensors:
        shape = tuple(int(n) for n in reversed(tensor.shape))                         # [out, in] / [D]
        weights[tensor.name] = torch.from_numpy(dequantize(tensor.data, tensor.tensor_type.name, shape, native))
        release_mapped(tensor.data)
    return weights


def same_table(head: torch.Tensor, embedding: torch.Tensor) -> bool:
    """Whether an LM head [V, D] holds the embedding table's values (equal, or as two quantizations of them)."""
    difference = torch.linalg.vector_norm((head - embedding).reshape(-1).double())
    return bool(difference <= SAME_TABLE * torch.linalg.vector_norm(embedding.reshape(-1).double()))
