"""Fixtures of the model tests: the reference implementation.

- hf_model (tests/conftest.py, shared with the lessons' answers in tests/unit): transformers' Llama loaded from the
  same GGUF file (eager attention, float32), once per test session (~18 s; a test that changes it restores it, as
  hf_kv_heads does);
- hf_model_float64: the same in float64, once per test module that asks for it.

transformers reads the GGUF file itself once per machine (its GGUF reader, tensor names and de-quantization: ~23 s
of CPU): the model it makes is saved (float32: every value of the file's Q8_0 and
F32 tensors is a float32 number: its config and weights) under REFERENCE_CACHE, keyed by the file and the versions,
and every other load (another pytest worker, the float64 copy, a later run) is the same transformers model made
from that config with those weights (~2 s).
"""
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from model.files.gguf import default_model_path

REFERENCE_CACHE = Path(tempfile.gettempdir()) / "atlas-reference-models"
WEIGHTS = "weights.pt"


def reference_model(dtype: torch.dtype):
    """transformers' model of the default GGUF file in `dtype`, eager attention, in eval mode (read from the file once
    per machine, then made from its saved weights: the module's docstring)."""
    import transformers

    path = default_model_path()
    stat = path.resolve().stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}|{torch.__version__}"
    saved = REFERENCE_CACHE / hashlib.sha256(key.encode()).hexdigest()[:20]
    if not (saved / WEIGHTS).is_file():
        made = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager")
        REFERENCE_CACHE.mkdir(parents=True, exist_ok=True)
        writing = Path(tempfile.mkdtemp(dir=REFERENCE_CACHE))
        made.config.quantization_config = None          # (transformers refuses to save a model read from a GGUF)
        made.config.to_json_file(writing / "config.json")
        torch.save(made.state_dict(), writing / WEIGHTS)
        try:
            os.rename(writing, saved)               # whole or not at all; another worker's copy may have come first
        except OSError:
            shutil.rmtree(writing, ignore_errors=True)
    config = transformers.AutoConfig.from_pretrained(str(saved))
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.load_state_dict(torch.load(saved / WEIGHTS, weights_only=True))
    return model.to(dtype).eval()


@pytest.fixture(scope="module")
def hf_model_float64():
    return reference_model(torch.float64)
