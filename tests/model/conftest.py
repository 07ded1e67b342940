"""Fixtures of the model tests: the reference implementation.

- hf_model (tests/conftest.py, shared with the lessons' answers in tests/unit): transformers' Llama loaded from the
  same GGUF file (eager attention, float32), once per test session (~18 s; a test that changes it restores it, as
  hf_kv_heads does);
- hf_model_float64: the same in float64, once per test module that asks for it.
"""
import pytest
import torch

from model.files.gguf import default_model_path


def reference_model(dtype: torch.dtype):
    """transformers' model of the default GGUF file in `dtype`, eager attention, in eval mode."""
    import transformers

    path = default_model_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=dtype, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="module")
def hf_model_float64():
    return reference_model(torch.float64)
