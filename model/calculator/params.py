"""Exact parameter counts, weight memory, KV-cache size and forward FLOPs for any decoder-only transformer shape, and
for the two other families: a BERT-style encoder and a T5-style encoder-decoder (encoder_counts.py, encoder_costs.py;
count_parameters(**shape) stays the decoders').

Pure Python (no torch, numpy, streamlit or plotly): every count is an exact Python int, so a 1T-parameter shape is
still exact. The layout covered is the GPT-2 / Llama family:

    token embedding [+ learned positions] -> n_layers x (norm, attention, norm, MLP) -> final norm -> lm head

Where each parameter goes (the same grouping the page and the tests use):
    embeddings  token embedding (vocab_size x d_model) + learned position embedding (max_positions x d_model)
    attention   q / k / v / o projection weights and their biases
    mlp         gelu: up + down;  swiglu: gate + up + down  (weights and biases)
    norms       two per layer (before attention, before MLP), optional per-head q/k norms, the final norm
    head        lm head (vocab_size x d_model, no bias); 0 when tied to the token embedding

The calculator's public names, gathered from shape.py (the shape and its checks), counts.py (count_parameters),
costs.py (memory, KV cache, FLOPs), presets.py (published shapes, the loaded model's shape), encoder_counts.py
(count_encoder_parameters, count_encoder_decoder_parameters: the other families' counts, shown by part: encoder,
decoder, cross-attention, relative bias, an untied head) and encoder_costs.py (an encoder pass's FLOPs, an
encoder-decoder generation's FLOPs and cache).
"""
from __future__ import annotations

from model.calculator.costs import (
    DTYPE_BITS,
    Flops,
    attention_flops_crossover,
    attention_variants,
    forward_flops_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    matmul_parameters,
    weight_memory,
)
from model.calculator.counts import Breakdown, LayerBreakdown, count_parameters
from model.calculator.encoder_costs import (
    GenerationFlops,
    PassFlops,
    encoder_decoder_cache_bytes,
    encoder_decoder_generation_flops,
    encoder_pass_flops,
)
from model.calculator.encoder_counts import (
    ENCODER_DECODER_FIELDS,
    ENCODER_FIELDS,
    EncoderBreakdown,
    EncoderDecoderBreakdown,
    count_encoder_decoder_parameters,
    count_encoder_parameters,
    encoder_decoder_tensor_group,
    encoder_shape_from_config,
    make_encoder_decoder_shape,
    make_encoder_shape,
)
from model.calculator.presets import (
    CUSTOM,
    ENCODER_DECODER_PRESETS,
    ENCODER_PRESETS,
    FAMILY_PRESET_SOURCES,
    PRESET_SOURCES,
    PRESETS,
    gguf_tensor_group,
    shape_from_config,
    tensor_group_sums,
)
from model.calculator.shape import (
    DEFAULTS,
    FIELDS,
    LABELS,
    LIMITS,
    MAX_BATCH,
    MAX_CONTEXT,
    MLP_KINDS,
    NORM_KINDS,
    POSITIONAL_KINDS,
    REQUIRED,
    Shape,
    ShapeError,
    make_shape,
    shape_errors,
)

__all__ = [
    "ENCODER_DECODER_FIELDS", "ENCODER_DECODER_PRESETS", "ENCODER_FIELDS", "ENCODER_PRESETS", "EncoderBreakdown",
    "EncoderDecoderBreakdown", "FAMILY_PRESET_SOURCES", "GenerationFlops", "PassFlops",
    "count_encoder_decoder_parameters", "count_encoder_parameters", "encoder_decoder_cache_bytes",
    "encoder_decoder_generation_flops", "encoder_decoder_tensor_group", "encoder_pass_flops",
    "encoder_shape_from_config", "make_encoder_decoder_shape", "make_encoder_shape",
    "Breakdown", "CUSTOM", "DEFAULTS", "DTYPE_BITS", "FIELDS", "Flops", "LABELS", "LIMITS", "LayerBreakdown",
    "MAX_BATCH", "MAX_CONTEXT", "MLP_KINDS", "NORM_KINDS", "POSITIONAL_KINDS", "PRESETS", "PRESET_SOURCES",
    "REQUIRED", "Shape", "ShapeError", "attention_flops_crossover", "attention_variants", "count_parameters",
    "forward_flops_per_token", "gguf_tensor_group", "kv_cache_bytes", "kv_cache_bytes_per_token", "make_shape",
    "matmul_parameters", "shape_errors", "shape_from_config", "tensor_group_sums", "weight_memory",
]
