"""What a GGUF file holds, read from its metadata only (nothing dequantized): for a model picker.

describe(path) gives the name, architecture, parameter count, quantization, file size and the memory the loaded
model needs, or the ModelLoadError reason why the file cannot be loaded. list_models(folder) describes every GGUF
in a folder. The reader memory-maps the file; only its header and tensor table are read.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from model.encoders import ENCODER_ARCHITECTURES
from model.encoders import reading as encoders
from model.errors import ModelLoadError
from model.files import gguf as G
from model.files.architectures import family
from model.files.peek import architecture_of

SUFFIX = ".gguf"


@dataclass(frozen=True)
class ModelInfo:
    """One model file as a picker lists it; error is set (and the rest may be empty) when it cannot be loaded."""

    path: Path
    name: str                           # the file name without .gguf
    file_bytes: int
    architecture: str = ""
    n_params: int = 0
    quantization: str = ""              # the most common tensor type, by parameters
    memory_bytes: int = 0               # what the loaded model holds (memory_needed)
    n_layers: int = 0
    n_heads: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def family(self) -> str | None:
        """"decoder", "encoder" (BERT) or "encoder-decoder" (T5)."""
        return family(self.architecture)


def memory_needed(tensors) -> int:
    """Bytes the loaded weights take (the loader's choice of float32 or quantized matrices: model.files.gguf)."""
    return G.memory_needed(tensors, G.keeps_quantized(tensors))


def quantization(tensors) -> str:
    """The tensor type holding the most parameters (e.g. Q4_K for a Q4_K_M file)."""
    counts = Counter()
    for t in tensors:
        counts[t.tensor_type.name] += int(t.n_elements)
    return counts.most_common(1)[0][0] if counts else ""


def describe(path: str | Path) -> ModelInfo:
    """The picker's line for one file: its metadata checked as the loader checks it (architecture, completeness,
    keys, tensors), without reading the vocabulary into a tokenizer or dequantizing anything."""
    path = Path(path)
    name = path.name.removesuffix(SUFFIX)
    try:
        size = path.stat().st_size
    except OSError as exc:
        return ModelInfo(path, name, 0, error=f"{path.name} cannot be read ({exc.strerror or exc}).")
    try:
        if architecture_of(path) in ENCODER_ARCHITECTURES:                 # BERT, T5: model.encoders' checks
            reader, config = encoders.inspect(path)
            return ModelInfo(path, name, size, architecture=config.architecture,
                             n_params=sum(int(t.n_elements) for t in reader.tensors),
                             quantization=quantization(reader.tensors), memory_bytes=encoders.memory_needed(
                                 reader.tensors), n_layers=config.n_layers, n_heads=config.n_heads)
        reader = G.open_reader(path)
        try:
            arch = G._architecture(reader, path)
            G._check_complete(reader, path)
            config = G._config(reader, path, arch)
            G._check_supported(reader, path, arch, config)
        except ModelLoadError:
            raise
        except Exception as exc:
            raise G._corrupt(path, exc) from exc
    except ModelLoadError as exc:
        return ModelInfo(path, name, size, error=str(exc))
    except OSError as exc:
        return ModelInfo(path, name, size, error=f"{path.name} cannot be read ({exc.strerror or exc}).")
    tensors = reader.tensors
    return ModelInfo(path, name, size, architecture=arch.name, n_params=sum(int(t.n_elements) for t in tensors),
                     quantization=quantization(tensors), memory_bytes=memory_needed(tensors),
                     n_layers=config.n_layers, n_heads=config.n_heads)


def model_files(folder: str | Path) -> list[Path]:
    """The GGUF files directly in folder (by name: *.gguf, and links to them), sorted; [] when it does not exist."""
    folder = Path(folder)
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [p for p in entries if p.name.endswith(SUFFIX) and not p.name.startswith(".") and p.is_file()]


def list_models(folder: str | Path) -> list[ModelInfo]:
    """describe() of every GGUF file in folder."""
    return [describe(p) for p in model_files(folder)]
