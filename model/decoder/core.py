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

from model.decoder.config import ModelConfig
from model.decoder.embedding import embedding_table
from model.decoder.rope import apply_rope, rope_cos_sin
from model.decoder.trace import ForwardTrace, LayerDetail
from model.files.gguf import read_gguf
from model.files.heap import paused_gc, release_free_heap
from model.tokenizers.byte_bpe import Tokenizer

DEFAULT_MAX_TOKENS = 512
CHECKPOINT_EVERY = 6  # keep every 6th layer's input: layer_detail re-runs at most 5 blocks; 1/6 of the memory
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
    scores: torch.Tensor | None  # [H, T, T] before the mask (only when asked for)
    pattern: torch.Tensor  # [H, T, T]
    mixed: torch.Tensor    # [H, T, hd] pattern @ v per head (zero for switched-off heads), before the projection
    out: torch.Tensor      # [T, d_model] after the output projection


class Attention:
    """Grouped-query causal self-attention with RoPE (half-split pairs: Q/K rows were un-permuted at load)."""

    def __init__(self, cfg: ModelConfig, w_qkv, w_o):
        self.cfg = cfg
        self.w_qkv = w_qkv          # [(H + 2 KV) hd, D]: W_q, W_k, W_v stacked by rows, one matmul for all three
        self.w_o = w_o              # [D, H hd]

    def __call__(self, h: torch.Tensor, cos, sin, mask: torch.Tensor, keep_scores: bool = False,
                 pattern_out: torch.Tensor | None = None,
                 heads_off: torch.Tensor | None = None) -> AttentionIntermediates:
        """One KV group at a time, so only [group, T, T] float32 buffers are alive. The forward pass writes the
        pattern straight into the trace (pattern_out, possibly float16) and keeps no scores; layer_detail asks
        for float32 scores and pattern. Either way the numbers are computed the same way.
        heads_off ([H] bool) zeroes those heads' mixed values before the output projection (head ablation)."""
        cfg = self.cfg
        T = h.shape[0]
        g = cfg.group_size
        qkv = F.linear(h, self.w_qkv)                                          # [T, (H + 2 KV) hd]
        q, k, v = qkv.split((cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim,
                             cfg.n_kv_heads * cfg.head_dim), dim=-1)
        q = q.view(T, cfg.n_heads, cfg.head_dim).transpose(0, 1)               # [H, T, hd]
        k = k.view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1)            # [KV, T, hd]
        v = v.view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1)            # [KV, T, hd]
        q_rot = apply_rope(q, cos, sin)                                        # [H, T, hd]
        k_rot = apply_rope(k, cos, sin)                                        # [KV, T, hd]
        scale = 1.0 / math.sqrt(cfg.head_dim)
        scores = torch.empty(cfg.n_heads, T, T) if keep_scores else None       # [H, T, T]
        pattern = torch.empty(cfg.n_heads, T, T) if pattern_out is None else pattern_out  # [H, T, T]
        mixed = torch.empty(cfg.n_heads, T, cfg.head_dim)                      # [H, T, hd]
        future = ~mask                                                         # [T, T] True where j > i
        for kv in range(cfg.n_kv_heads):
            heads = slice(kv * g, (kv + 1) * g)                                # query heads reading KV head kv
            q_group = q_rot[heads].reshape(g * T, cfg.head_dim)                 # [g T, hd]: one mm for the group
            group_scores = torch.mm(q_group, k_rot[kv].T).mul_(scale).view(g, T, T)  # [g, T, T]
            if keep_scores:
                scores[heads] = group_scores
            group_pattern = torch.softmax(group_scores.masked_fill_(future, float("-inf")), dim=-1)  # [g, T, T]
            pattern[heads] = group_pattern
            torch.mm(group_pattern.view(g * T, T), v[kv], out=mixed[heads].view(g * T, cfg.head_dim))  # [g T, hd]
        if heads_off is not None:
            mixed[heads_off] = 0.0
        out = F.linear(mixed.transpose(0, 1).reshape(T, -1), self.w_o)         # [T, D]
        return AttentionIntermediates(q, k, v, q_rot, k_rot, scores, pattern, mixed, out)


@dataclass(frozen=True)
class MLPIntermediates:
    """Named tensors of one SwiGLU MLP."""

    gate: torch.Tensor     # [T, F] gate projection
    act: torch.Tensor      # [T, F] silu(gate)
    up: torch.Tensor       # [T, F] up projection
    product: torch.Tensor  # [T, F] silu(gate) * up
    out: torch.Tensor      # [T, d_model] down projection


class SwiGLU:
    """down(silu(gate(x)) * up(x)), gate and up fused into one matmul."""

    def __init__(self, w_gate_up, w_down):
        self.d_ff = w_down.shape[1]
        self.w_gate_up = w_gate_up      # [2 F, D]: W_gate, W_up stacked by rows
        self.w_down = w_down            # [D, F]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(h, self.w_gate_up).split(self.d_ff, dim=-1)  # [T, F] each, views of one buffer
        return F.linear(F.silu(gate, inplace=True).mul_(up), self.w_down)  # [T, D]

    def parts(self, h: torch.Tensor) -> MLPIntermediates:
        """__call__ with every intermediate kept (the same operations, not in place)."""
        gate, up = F.linear(h, self.w_gate_up).split(self.d_ff, dim=-1)  # [T, F] each
        act = F.silu(gate)                                               # [T, F]
        product = act * up                                               # [T, F]
        return MLPIntermediates(gate, act, up, product, F.linear(product, self.w_down))


@dataclass(frozen=True)
class BlockIntermediates:
    """Named tensors of one block, in the order the block computes them."""

    x: torch.Tensor          # [T, D] residual stream in
    attn_in: torch.Tensor    # [T, D] rms_norm(x) * attn_norm weight
    attn: AttentionIntermediates
    mid: torch.Tensor        # [T, D] x + attn.out
    mlp_in: torch.Tensor     # [T, D] rms_norm(mid) * mlp_norm weight
    mlp: MLPIntermediates
    out: torch.Tensor        # [T, D] mid + mlp.out: the next block's input


class Block:
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, weights: dict[str, np.ndarray], i: int):
        """Takes (pops) block i's tensors from weights (q/k/v and gate/up come fused: model.gguf.FUSED_ROWS)."""
        def take(name: str) -> torch.Tensor:
            return torch.from_numpy(weights.pop(f"blk.{i}.{name}.weight"))

        self.eps = cfg.norm_eps
        self.attn_norm = take("attn_norm")
        self.attn = Attention(cfg, take("attn_qkv"), take("attn_output"))
        self.mlp_norm = take("ffn_norm")
        self.mlp = SwiGLU(take("ffn_gate_up"), take("ffn_down"))

    def attention(self, x: torch.Tensor, cos, sin, mask, keep_scores: bool = False,
                  pattern_out: torch.Tensor | None = None,
                  heads_off: torch.Tensor | None = None) -> AttentionIntermediates:
        return self.attn(rms_norm(x, self.attn_norm, self.eps), cos, sin, mask, keep_scores, pattern_out, heads_off)

    def __call__(self, x: torch.Tensor, cos, sin, mask, pattern_out: torch.Tensor | None = None,
                 heads_off: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attention(x, cos, sin, mask, pattern_out=pattern_out, heads_off=heads_off).out  # [T, D]
        return x + self.mlp(rms_norm(x, self.mlp_norm, self.eps))              # [T, D]

    def parts(self, x: torch.Tensor, cos, sin, mask, keep_scores: bool = True) -> BlockIntermediates:
        """__call__ step by step with every intermediate kept (the same operations in the same order)."""
        attn_in = rms_norm(x, self.attn_norm, self.eps)                        # [T, D]
        attn = self.attn(attn_in, cos, sin, mask, keep_scores)
        mid = x + attn.out                                                     # [T, D]
        mlp_in = rms_norm(mid, self.mlp_norm, self.eps)                        # [T, D]
        mlp = self.mlp.parts(mlp_in)
        return BlockIntermediates(x, attn_in, attn, mid, mlp_in, mlp, mid + mlp.out)


class Decoder:
    """A loaded decoder with its tokenizer: encode / decode / run / layer_detail."""

    def __init__(self, config: ModelConfig, weights: dict[str, np.ndarray], tokenizer: Tokenizer, source: str,
                 tensor_sizes: dict[str, int], eos_token_id: int | None = None):
        """Builds the blocks from weights, emptying that dict as it goes."""
        self.config = config
        self.source = source
        self.tokenizer = tokenizer
        self.tensor_sizes = dict(tensor_sizes)
        self.eos_token_id = eos_token_id                                             # generation stops after it
        self.embedding = embedding_table(weights.pop("token_embd.weight"))           # [V, D]
        self.lm_head = self.embedding if config.tied_embeddings else embedding_table(weights.pop("output.weight"))
        self.out_norm = torch.from_numpy(weights.pop("output_norm.weight"))          # [D]
        self.blocks = [Block(config, weights, i) for i in range(config.n_layers)]

    @classmethod
    def from_gguf(cls, path: str | os.PathLike | None = None) -> Decoder:
        with paused_gc():
            g = read_gguf(path)
            lm = cls(g.config, g.weights, g.tokenizer, str(g.path), g.tensor_sizes, g.eos_token_id)
            del g
        release_free_heap()
        return lm

    @property
    def name(self) -> str:
        return self.config.name

    def encode(self, text: str) -> list[int]:
        """Token ids of text, after the BOS id when the model file asks for one (tokenizer.ggml.add_bos_token)."""
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
        if len(all_ids) == len(self.tokenizer.prefix_ids):
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
        checkpoints: dict[int, np.ndarray] = {}
        with torch.inference_mode():
            cos, sin = rope_cos_sin(range(T), cfg.head_dim, cfg.rope_theta)         # [T, hd/2] each
            mask = causal_mask(T)                                                  # [T, T]
            x = self.embedding.rows(torch.tensor(ids))                             # [T, D]
            for i, block in enumerate(self.blocks):
                if i % CHECKPOINT_EVERY == 0:
                    checkpoints[i] = _read_only(x.numpy().copy())                  # [T, D]
                x = block(x, cos, sin, mask, pattern_out=torch.from_numpy(attention[i]))
            last = rms_norm(x[-1], self.out_norm, cfg.norm_eps)                    # [D]: only the last position
            logits = self.lm_head.logits(last)                                     # [V]
        return ForwardTrace(
            text=text, token_ids=list(ids), tokens=self.token_strings(ids), attention=_read_only(attention),
            next_token_logits=_read_only(logits.numpy().copy()),
            truncated=(n_tokens_total or T) > T, n_tokens_total=n_tokens_total or T, checkpoints=checkpoints)

    def layer_detail(self, trace: ForwardTrace, layer: int) -> LayerDetail:
        """Recompute one layer's q, k, v (pre/post RoPE), scores, mask and pattern, re-running the blocks from
        the nearest checkpoint with the forward pass's own code: the numbers are exactly the forward's."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer must be from 0 to {self.config.n_layers - 1}, got {layer}")
        T = trace.n_tokens
        start = layer - layer % CHECKPOINT_EVERY
        with torch.inference_mode():
            cos, sin = rope_cos_sin(range(T), self.config.head_dim, self.config.rope_theta)
            mask = causal_mask(T)
            x = torch.from_numpy(trace.checkpoints[start].copy())                  # [T, D]
            for block in self.blocks[start:layer]:
                x = block(x, cos, sin, mask)
            att = self.blocks[layer].attention(x, cos, sin, mask, keep_scores=True)
        return LayerDetail(layer=layer, q=att.q.numpy(), q_rot=att.q_rot.numpy(), k=att.k.numpy(),
                           k_rot=att.k_rot.numpy(), v=att.v.numpy(), scores=att.scores.numpy(),
                           mask=mask.numpy(), pattern=att.pattern.numpy())


def causal_mask(T: int) -> torch.Tensor:
    """[T, T] bool, True where query i may attend to key j (j <= i)."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
