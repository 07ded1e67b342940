"""A BERT encoder from a `bert` GGUF, computed as transformers' BertModel (eager attention, erf GELU): token +
position + token-type-0 embeddings and a LayerNorm, then post-norm blocks (attention with biases and scores scaled
by 1/sqrt(head_dim), no mask: every token sees every token; the residual add then LayerNorm; a GELU MLP; the
residual add then LayerNorm). llama.cpp's GELU is a tanh table; this is the erf GELU BERT was trained with.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from model.decoder.trace import LayerDetail
from model.encoders.attention import AttentionParts, attend, split_heads
from model.encoders.common import TokenizerMethods, as_numpy, attention_buffer, read_only
from model.encoders.config import BertConfig
from model.encoders.reading import EncoderFile
from model.encoders.traces import EncoderTrace


class BertEncoder(TokenizerMethods):
    """A loaded BERT with its WordPiece tokenizer: encode / run / layer_detail / pooled."""

    def __init__(self, f: EncoderFile):
        self.config: BertConfig = f.config
        self.tokenizer = f.tokenizer
        self.source = str(f.path)
        self.tensor_sizes = dict(f.tensor_sizes)
        self.weights = f.weights                                                     # name -> float32 tensor

    def _w(self, name: str) -> torch.Tensor:
        return self.weights[name]

    def embed(self, ids: list[int]) -> torch.Tensor:
        """The normed embeddings entering layer 0: [T, D]."""
        T = len(ids)
        x = self._w("token_embd.weight")[torch.tensor(ids)] + self._w("token_types.weight")[0]   # [T, D]
        x = x + self._w("position_embd.weight")[:T]                                  # [T, D]
        return self._norm(x, "token_embd_norm")

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (self.config.d_model,), self._w(f"{name}.weight"), self._w(f"{name}.bias"),
                            self.config.norm_eps)

    def attention(self, x: torch.Tensor, layer: int) -> AttentionParts:
        """Layer `layer`'s self-attention of x [T, D] (every key allowed)."""
        cfg, p = self.config, f"blk.{layer}."
        q, k, v = (split_heads(F.linear(x, self._w(p + f"attn_{n}.weight"), self._w(p + f"attn_{n}.bias")),
                               cfg.n_heads) for n in "qkv")                          # [H, T, hd] each
        return attend(q, k, v, self._w(p + "attn_output.weight"), self._w(p + "attn_output.bias"),
                      1.0 / math.sqrt(cfg.head_dim))

    def block(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the block's output [T, D], its attention pattern [H, T, T])."""
        p = f"blk.{layer}."
        parts = self.attention(x, layer)
        h = self._norm(x + parts.out, p + "attn_output_norm")                        # [T, D]
        up = F.gelu(F.linear(h, self._w(p + "ffn_up.weight"), self._w(p + "ffn_up.bias")))       # [T, F]
        down = F.linear(up, self._w(p + "ffn_down.weight"), self._w(p + "ffn_down.bias"))       # [T, D]
        return self._norm(h + down, p + "layer_output_norm"), parts.pattern

    def run(self, text: str, max_tokens: int | None = None) -> EncoderTrace:
        """Tokenize text ([CLS] ... [SEP]; cut to max_tokens, by default 512 or the context, keeping [SEP]) and run
        the encoder, recording every layer's attention and hidden states."""
        ids, total = self.text_ids(text, max_tokens)
        return self.run_ids(ids, text, total)

    def run_ids(self, ids: list[int], text: str = "", n_tokens_total: int | None = None) -> EncoderTrace:
        """Run the encoder on token ids as given (at most the context length)."""
        cfg, T = self.config, len(ids)
        if not 1 <= T <= cfg.max_positions:
            raise ValueError(f"Need 1 to {cfg.max_positions} tokens, got {T}")
        if min(ids) < 0 or max(ids) >= cfg.vocab_size:
            raise ValueError(f"token ids must be from 0 to {cfg.vocab_size - 1}")
        attention = attention_buffer((cfg.n_layers, cfg.n_heads, T, T))              # [L, H, T, T]
        hidden = np.empty((cfg.n_layers + 1, T, cfg.d_model), dtype=np.float32)      # [L + 1, T, D]
        with torch.inference_mode():
            x = self.embed(ids)                                                      # [T, D]
            hidden[0] = x.numpy()
            for layer in range(cfg.n_layers):
                x, pattern = self.block(x, layer)
                attention[layer] = pattern.numpy()
                hidden[layer + 1] = x.numpy()
        return EncoderTrace(text=text, token_ids=list(ids), tokens=self.token_strings(ids),
                            attention=read_only(attention), last_hidden_state=read_only(hidden[-1].copy()),
                            truncated=(n_tokens_total or T) > T, n_tokens_total=n_tokens_total or T,
                            hidden_states=read_only(hidden))

    def layer_detail(self, trace: EncoderTrace, layer: int) -> LayerDetail:
        """One layer's q, k, v, scores (q.k / sqrt(head_dim)), mask (all True) and pattern, recomputed from the
        trace's input of that layer with the forward pass's own code. No RoPE: q_rot is q and k_rot is k."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer must be from 0 to {self.config.n_layers - 1}, got {layer}")
        with torch.inference_mode():
            parts = self.attention(torch.from_numpy(trace.hidden_states[layer].copy()), layer)
        q, k, v = as_numpy(parts.q), as_numpy(parts.k), as_numpy(parts.v)
        return LayerDetail(layer=layer, q=q, q_rot=q, k=k, k_rot=k, v=v, scores=as_numpy(parts.scores),
                           mask=read_only(trace.allowed), pattern=as_numpy(parts.pattern))

    def pooled(self, trace: EncoderTrace) -> np.ndarray:
        """[d_model] float32: the text's embedding as the file's pooling makes it (mean over tokens, [CLS], or the
        last token; a file without pooling: the mean)."""
        states = trace.last_hidden_state                                             # [T, D]
        if self.config.pooling == "cls":
            return states[0].copy()
        if self.config.pooling == "last":
            return states[-1].copy()
        return states.mean(axis=0, dtype=np.float64).astype(np.float32)
