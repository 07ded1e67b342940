"""The Llama-style decoder in pure torch (float32, eager attention) that records a ForwardTrace.

One class per concept, as in nanoGPT. Weights are read-only tensors shared by every caller; a forward pass keeps
all its state in local variables, so one model can serve many Streamlit sessions at once.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.config import ModelConfig
from model.gguf import read_gguf
from model.positional import apply_rope, rope_cos_sin
from model.tokenizer import Tokenizer
from model.trace import ForwardTrace, LayerDetail

DEFAULT_MAX_TOKENS = 512
FLOAT32_ATTENTION_BYTES = 64 * 2**20  # keep attention in float32 up to this size (T <= 249 here), float16 above


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) * weight over the last axis, in float32 (activations reach ~22,500 at position 0)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@dataclass(frozen=True)
class AttentionIntermediates:
    """Named tensors of one attention layer (TransformerLens style)."""

    q: torch.Tensor        # [H, T, hd]
    k: torch.Tensor        # [KV, T, hd]
    v: torch.Tensor        # [KV, T, hd]
    q_rot: torch.Tensor    # [H, T, hd]
    k_rot: torch.Tensor    # [KV, T, hd]
    scores: torch.Tensor   # [H, T, T] before the mask
    pattern: torch.Tensor  # [H, T, T]
    out: torch.Tensor      # [T, d_model] after the output projection


class Attention:
    """Grouped-query causal self-attention with RoPE (half-split pairs: Q/K rows were un-permuted at load)."""

    def __init__(self, cfg: ModelConfig, w_q, w_k, w_v, w_o):
        self.cfg = cfg
        self.w_qkv = torch.cat((w_q, w_k, w_v), dim=0).contiguous()  # [(H + 2 KV) hd, D]: one matmul for all three
        self.w_o = w_o                                                # [D, H hd]

    def __call__(self, h: torch.Tensor, cos, sin, mask: torch.Tensor) -> AttentionIntermediates:
        cfg = self.cfg
        T = h.shape[0]
        qkv = F.linear(h, self.w_qkv)                                          # [T, (H + 2 KV) hd]
        q, k, v = qkv.split((cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim,
                             cfg.n_kv_heads * cfg.head_dim), dim=-1)
        q = q.view(T, cfg.n_heads, cfg.head_dim).transpose(0, 1)               # [H, T, hd]
        k = k.view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1)            # [KV, T, hd]
        v = v.view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1)            # [KV, T, hd]
        q_rot = apply_rope(q, cos, sin)                                        # [H, T, hd]
        k_rot = apply_rope(k, cos, sin)                                        # [KV, T, hd]
        g = cfg.group_size
        q_grouped = q_rot.reshape(cfg.n_kv_heads, g * T, cfg.head_dim)         # [KV, g T, hd]: heads of one group
        scores = (q_grouped @ k_rot.transpose(1, 2)).view(cfg.n_heads, T, T)   # [H, T, T]
        scores = scores * (1.0 / math.sqrt(cfg.head_dim))
        pattern = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # [H, T, T]
        mixed = pattern.view(cfg.n_kv_heads, g * T, T) @ v                     # [KV, g T, hd]
        mixed = mixed.view(cfg.n_heads, T, cfg.head_dim).transpose(0, 1).reshape(T, -1)  # [T, H hd]
        out = F.linear(mixed, self.w_o)                                        # [T, D]
        return AttentionIntermediates(q, k, v, q_rot, k_rot, scores, pattern, out)


class SwiGLU:
    """down(silu(gate(x)) * up(x)), gate and up fused into one matmul."""

    def __init__(self, w_gate, w_up, w_down):
        self.d_ff = w_gate.shape[0]
        self.w_gate_up = torch.cat((w_gate, w_up), dim=0).contiguous()  # [2 F, D]
        self.w_down = w_down                                            # [D, F]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(h, self.w_gate_up).split(self.d_ff, dim=-1)  # [T, F] each
        return F.linear(F.silu(gate) * up, self.w_down)                  # [T, D]


class Block:
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, weights: dict[str, torch.Tensor], i: int):
        p = f"blk.{i}."
        self.eps = cfg.norm_eps
        self.attn_norm = weights[p + "attn_norm.weight"]
        self.attn = Attention(cfg, weights[p + "attn_q.weight"], weights[p + "attn_k.weight"],
                              weights[p + "attn_v.weight"], weights[p + "attn_output.weight"])
        self.mlp_norm = weights[p + "ffn_norm.weight"]
        self.mlp = SwiGLU(weights[p + "ffn_gate.weight"], weights[p + "ffn_up.weight"],
                          weights[p + "ffn_down.weight"])

    def attention(self, x: torch.Tensor, cos, sin, mask) -> AttentionIntermediates:
        return self.attn(rms_norm(x, self.attn_norm, self.eps), cos, sin, mask)

    def __call__(self, x: torch.Tensor, cos, sin, mask) -> tuple[torch.Tensor, torch.Tensor]:
        att = self.attention(x, cos, sin, mask)
        x = x + att.out                                                   # [T, D]
        x = x + self.mlp(rms_norm(x, self.mlp_norm, self.eps))            # [T, D]
        return x, att.pattern


class LanguageModel:
    """A loaded decoder with its tokenizer: encode / decode / run / layer_detail."""

    def __init__(self, config: ModelConfig, weights: dict[str, np.ndarray], tokenizer: Tokenizer, source: str):
        self.config = config
        self.source = source
        self.tokenizer = tokenizer
        self.tensor_sizes = {name: int(w.size) for name, w in weights.items()}
        w = {name: torch.from_numpy(a) for name, a in weights.items()}
        self.embedding = w["token_embd.weight"]                                      # [V, D]
        self.lm_head = self.embedding if config.tied_embeddings else w["output.weight"]  # [V, D]
        self.out_norm = w["output_norm.weight"]                                      # [D]
        self.blocks = [Block(config, w, i) for i in range(config.n_layers)]

    @classmethod
    def from_gguf(cls, path: str | os.PathLike | None = None) -> LanguageModel:
        g = read_gguf(path)
        return cls(g.config, g.weights, Tokenizer(g.tokens, g.token_types, name=g.path.stem), str(g.path))

    @property
    def name(self) -> str:
        return self.config.name

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_strings(self, ids: list[int]) -> list[str]:
        return self.tokenizer.token_strings(ids)

    def check_max_tokens(self, max_tokens: int) -> int:
        limit = self.config.max_positions
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or \
                not 1 <= max_tokens <= limit:
            raise ValueError(f"max_tokens must be an integer from 1 to {limit} (the model's context length), "
                             f"got {max_tokens!r}")
        return int(max_tokens)

    def run(self, text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> ForwardTrace:
        """Tokenize text (cut to max_tokens), run the decoder, and record attention and next-token logits."""
        max_tokens = self.check_max_tokens(max_tokens)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("The text is empty. Type some text (at least one non-space character) to run the model.")
        all_ids = self.encode(text)
        if not all_ids:
            raise ValueError("The text has no tokens this model can read (only bytes outside its vocabulary). "
                             "Type some ordinary text.")
        ids = all_ids[:max_tokens]
        return self.run_ids(ids, text=text, n_tokens_total=len(all_ids))

    def run_ids(self, ids: list[int], text: str = "", n_tokens_total: int | None = None) -> ForwardTrace:
        """Run the decoder on token ids (at most the context length)."""
        cfg = self.config
        T = len(ids)
        if not 1 <= T <= cfg.max_positions:
            raise ValueError(f"Need 1 to {cfg.max_positions} tokens, got {T}")
        n_values = cfg.n_layers * cfg.n_heads * T * T
        dtype = np.float32 if 4 * n_values <= FLOAT32_ATTENTION_BYTES else np.float16
        attention = np.empty((cfg.n_layers, cfg.n_heads, T, T), dtype=dtype)       # [L, H, T, T]
        residual = np.empty((cfg.n_layers, T, cfg.d_model), dtype=np.float32)     # [L, T, D]
        with torch.inference_mode():
            cos, sin = rope_cos_sin(range(T), cfg.head_dim, cfg.rope_theta)         # [T, hd/2] each
            mask = causal_mask(T)                                                  # [T, T]
            x = self.embedding[torch.tensor(ids)]                                  # [T, D]
            for i, block in enumerate(self.blocks):
                residual[i] = x.numpy()
                x, pattern = block(x, cos, sin, mask)
                attention[i] = pattern.numpy()
            last = rms_norm(x[-1], self.out_norm, cfg.norm_eps)                    # [D]: only the last position
            logits = F.linear(last, self.lm_head)                                  # [V]
        return ForwardTrace(
            text=text, token_ids=list(ids), tokens=self.token_strings(ids), attention=_read_only(attention),
            next_token_logits=_read_only(logits.numpy().copy()),
            truncated=(n_tokens_total or T) > T, n_tokens_total=n_tokens_total or T, residual=_read_only(residual))

    def layer_detail(self, trace: ForwardTrace, layer: int) -> LayerDetail:
        """Recompute one layer's q, k, v (pre/post RoPE), scores, mask and pattern from the cached residual."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer must be from 0 to {self.config.n_layers - 1}, got {layer}")
        T = trace.n_tokens
        with torch.inference_mode():
            cos, sin = rope_cos_sin(range(T), self.config.head_dim, self.config.rope_theta)
            mask = causal_mask(T)
            att = self.blocks[layer].attention(torch.from_numpy(trace.residual[layer].copy()), cos, sin, mask)
        return LayerDetail(layer=layer, q=att.q.numpy(), q_rot=att.q_rot.numpy(), k=att.k.numpy(),
                           k_rot=att.k_rot.numpy(), v=att.v.numpy(), scores=att.scores.numpy(),
                           mask=mask.numpy(), pattern=att.pattern.numpy())

    def generate(self, text: str, n_new_tokens: int = 8) -> str:
        """Greedy continuation of text (for sanity checks; re-runs the full forward per token)."""
        ids = self.encode(text)
        for _ in range(n_new_tokens):
            ids.append(int(np.argmax(self.run_ids(ids).next_token_logits)))
        return self.decode(ids[len(self.encode(text)):])


def causal_mask(T: int) -> torch.Tensor:
    """[T, T] bool, True where query i may attend to key j (j <= i)."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
