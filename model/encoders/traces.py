"""What an encoder's run records: EncoderTrace (BERT: one text, bidirectional attention) and Seq2SeqTrace (T5: a
source through the encoder, a target through the decoder with its causal self-attention and its cross-attention
to the source)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class EncoderTrace:
    """One run of a BERT encoder on a text."""

    text: str
    token_ids: list[int]            # [CLS] ... [SEP] as the file's tokenizer adds them
    tokens: list[str]               # readable labels ('##ing' for a continuation)
    attention: np.ndarray           # [n_layers, n_heads, T, T] post-softmax, no mask; float32 (float16 when long)
    last_hidden_state: np.ndarray   # [T, d_model] float32, the last block's output
    truncated: bool                 # the text had more tokens than max_tokens and was cut (its [SEP] kept)
    n_tokens_total: int             # tokens of the whole text
    hidden_states: np.ndarray = field(repr=False)  # [n_layers + 1, T, d_model] float32: embeddings, each output

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def allowed(self) -> np.ndarray:
        """[T, T] bool: every query may attend to every key."""
        return np.ones((self.n_tokens, self.n_tokens), dtype=bool)


@dataclass(frozen=True, eq=False)
class Seq2SeqTrace:
    """One run of a T5 encoder on a source and of its decoder on a target."""

    source: str
    target: str
    token_ids: list[int]            # the encoder's input: the source's pieces, then </s>
    tokens: list[str]               # their readable labels
    target_ids: list[int]           # the decoder's input: the start token, then the target's pieces
    target_tokens: list[str]
    encoder_attention: np.ndarray   # [L_enc, H, S, S] post-softmax, no mask (+ relative position bias)
    attention: np.ndarray           # [L_dec, H, T, T] the decoder's causal self-attention
    cross_attention: np.ndarray     # [L_dec, H, T, S] each target position over the source
    next_token_logits: np.ndarray   # [vocab_size] float32 after the last target token
    encoder_output: np.ndarray      # [S, d_model] float32 after the encoder's final norm (cross-attention's keys)
    last_hidden_state: np.ndarray   # [T, d_model] float32 after the decoder's final norm (before any scaling)
    truncated: bool                 # the source had more tokens than max_tokens and was cut (its </s> kept)
    n_tokens_total: int             # tokens of the whole source
    encoder_hidden_states: np.ndarray = field(repr=False)  # [L_enc + 1, S, d_model]: embeddings, each output
    decoder_hidden_states: np.ndarray = field(repr=False)  # [L_dec + 1, T, d_model]

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def n_target_tokens(self) -> int:
        return len(self.target_ids)
