"""The encoder families, read from llama.cpp's GGUFs: BERT (encoder-only: bidirectional attention, no mask) and T5
(encoder-decoder: the decoder's causal self-attention and its cross-attention to the source). Exact against
transformers' BertModel and T5ForConditionalGeneration with the same weights.

reading.py (the strict loader, over model.files.gguf's reader), layouts.py (each file's keys and tensors),
config.py, attention.py (one attention layer), bert.py, t5_layers.py (T5's blocks), t5.py, t5_generation.py,
traces.py, common.py (tokenizer methods, limits)."""
from __future__ import annotations

import os

from model.files.heap import paused_gc, release_free_heap

ENCODER_ARCHITECTURES = ("bert", "t5")


def load_encoder(path: str | os.PathLike):
    """A BertEncoder or T5EncoderDecoder from a bert / t5 GGUF, or ModelLoadError."""
    from model.encoders.bert import BertEncoder
    from model.encoders.reading import read_encoder_gguf
    from model.encoders.t5 import T5EncoderDecoder

    with paused_gc():
        f = read_encoder_gguf(path)
        model = BertEncoder(f) if f.config.architecture == "bert" else T5EncoderDecoder(f)
        del f
    release_free_heap()
    return model
