"""Fixtures of the model tests: the reference implementation.

- hf_model: transformers' Llama loaded from the same GGUF file (eager attention, float32), once per test session
  (~18 s; a test that changes it restores it, as hf_kv_heads does).
"""
import pytest
import torch

from model.files.gguf import default_model_path


@pytest.fixture(scope="session")
def hf_model():
    import transformers

    path = default_model_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager")
    return model.eval()
