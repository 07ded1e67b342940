"""A models folder of tiny GGUFs, one per architecture, each with its own layer and head counts (written once per
test session; harness/tiny_gguf.py). The app reads it through ATLAS_MODELS_DIR."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import tiny_gguf
from harness.tiny_gguf import Tiny, write_tiny

SHAPES = {  # name -> the tiny model: layers and heads differ, so a page that kept the old model's shows it
    "tiny-llama": Tiny(arch="llama", n_layers=3, n_heads=4, n_kv_heads=2),
    "tiny-qwen2": Tiny(arch="qwen2", n_layers=2, n_heads=2, n_kv_heads=1, quant="Q8_0"),
    "tiny-qwen3": Tiny(arch="qwen3", n_layers=4, n_heads=4, n_kv_heads=4, head_dim=32),
    "tiny-gpt2": Tiny(arch="gpt2", n_layers=2, n_heads=8, n_kv_heads=8, context=128),
}


def write_models(folder: Path) -> Path:
    """The tiny models in folder (their vocabulary is SmolLM2's first merges: they are written with its
    pre-tokenizer, which splits text as the app's loader expects for that vocabulary)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiny_gguf, "PRE_TOKENIZER", {**tiny_gguf.PRE_TOKENIZER, "qwen2": "smollm", "qwen3": "smollm"})
        for name, tiny in SHAPES.items():
            write_tiny(folder / f"{name}.gguf", tiny)
    return folder
