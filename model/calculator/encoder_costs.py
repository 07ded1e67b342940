"""FLOPs and memory of the two other families (exact ints; a multiply-add is 2 FLOPs, as for the decoders):

- an encoder pass (BERT) over n tokens: every token through every projection and MLP, and every token attending to
  all n (no mask): encoder_pass_flops;
- an encoder-decoder generation (T5): the encoder pass over the source, the cross-attention's keys and values made
  once per decoder layer, then each new token through the decoder (self-attention over the target so far,
  cross-attention over the whole source, MLP, LM head): encoder_decoder_generation_flops; its cache (the decoder's
  self-attention keys and values of the target, the cross-attention's of the source): encoder_decoder_cache_bytes.
Norms, softmax, activations, biases and the position bias are left out (a few percent), as for the decoders.
"""
from __future__ import annotations

from dataclasses import dataclass

from model.calculator.costs import DTYPE_BITS, _check_positive
from model.calculator.encoder_counts import make_encoder_decoder_shape, make_encoder_shape
from model.calculator.shape import MAX_BATCH, MAX_CONTEXT


@dataclass(frozen=True)
class PassFlops:
    """Forward FLOPs of a whole encoder pass over n_tokens tokens."""

    matmul: int        # 2 x n_tokens x the layers' matrix parameters (q, k, v, o, MLP; no head, no pooler)
    attention: int     # 2 x 2 x n_layers x n_heads x head_dim x n_tokens^2 (q.k, then the values)
    n_tokens: int

    @property
    def total(self) -> int:
        return self.matmul + self.attention


@dataclass(frozen=True)
class GenerationFlops:
    """Forward FLOPs of an encoder-decoder writing target_len tokens for a source of source_len tokens."""

    encoder: int            # the encoder pass over the source (its matrices and its attention)
    cross_keys: int         # each decoder layer's cross-attention keys and values of the source, made once
    decoder_matmul: int     # every new token through the decoder's projections, MLPs and the LM head
    self_attention: int     # token t (from 0) attends to t + 1 target positions
    cross_attention: int    # every token attends to the whole source
    source_len: int
    target_len: int

    @property
    def total(self) -> int:
        return self.encoder + self.cross_keys + self.decoder_matmul + self.self_attention + self.cross_attention


def encoder_pass_flops(shape: dict, n_tokens: int) -> PassFlops:
    """FLOPs of a BERT-style encoder's pass over n_tokens tokens (shape: count_encoder_parameters' keys)."""
    s = make_encoder_shape(**shape)
    T = _check_positive("n_tokens", n_tokens, MAX_CONTEXT)
    d, layers = s["d_model"], s["n_layers"]
    per_token = layers * (4 * d * d + 2 * d * s["d_ff"])                         # q, k, v, o, up, down
    return PassFlops(matmul=2 * T * per_token, attention=2 * 2 * layers * d * T * T, n_tokens=T)


def encoder_decoder_generation_flops(shape: dict, source_len: int, target_len: int) -> GenerationFlops:
    """FLOPs of a T5-style model encoding source_len tokens and writing target_len (the decoder fed the start
    token, then each new token; a KV cache), shape: count_encoder_decoder_parameters' keys."""
    s = make_encoder_decoder_shape(**shape)
    S = _check_positive("source_len", source_len, MAX_CONTEXT)
    T = _check_positive("target_len", target_len, MAX_CONTEXT)
    d, inner, heads_width = s["d_model"], s["n_heads"] * s["head_dim"], s["n_heads"] * s["head_dim"]
    mlp = (3 if s["mlp"] == "gated-gelu" else 2) * d * s["d_ff"]
    enc, dec = s["n_layers"], s["n_decoder_layers"]
    encoder = 2 * S * enc * (4 * d * inner + mlp) + 4 * enc * heads_width * S * S
    per_token = dec * (4 * d * inner + 2 * d * inner + mlp) + s["vocab_size"] * d   # self q/k/v/o, cross q/o, head
    return GenerationFlops(encoder=encoder, cross_keys=2 * S * dec * 2 * d * inner, decoder_matmul=2 * T * per_token,
                           self_attention=4 * dec * heads_width * T * (T + 1) // 2,
                           cross_attention=4 * dec * heads_width * S * T, source_len=S, target_len=T)


def encoder_decoder_cache_bytes(shape: dict, source_len: int, target_len: int, batch: int = 1,
                                dtype: str = "bf16") -> dict[str, int]:
    """{"self": the decoder's keys and values of target_len positions, "cross": the cross-attention's of
    source_len positions} in bytes, for `batch` sequences."""
    s = make_encoder_decoder_shape(**shape)
    if dtype not in DTYPE_BITS:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BITS)}, got {dtype!r}")
    S = _check_positive("source_len", source_len, MAX_CONTEXT)
    T = _check_positive("target_len", target_len, MAX_CONTEXT)
    batch = _check_positive("batch", batch, MAX_BATCH)
    per_position = 2 * s["n_decoder_layers"] * s["n_heads"] * s["head_dim"] * batch
    return {"self": -(-per_position * T * DTYPE_BITS[dtype] // 8),
            "cross": -(-per_position * S * DTYPE_BITS[dtype] // 8)}
