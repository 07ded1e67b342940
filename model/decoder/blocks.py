"""The parts a decoder block is assembled from, in torch (float32, eager attention; the attention's scores, softmax and
mix in one native call where the kernels are built, model/native/attention.py).

One class per concept, as in nanoGPT: Norm (RMSNorm or LayerNorm), Attention (grouped-query, optional q/k/v and
output biases, optional per-head q/k RMSNorm, RoPE or none), SwiGLU and GeluMLP, and the pre-norm Block. Which parts
a block uses comes from the ModelConfig the GGUF reader built. Weights are read-only tensors shared by every caller;
a call keeps all its state in local variables, so one model can serve many Streamlit sessions at once.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.decoder.config import ModelConfig
from model.decoder.int8_blocks import int8_blocks_of
from model.decoder.matrices import QuantizedMatrix
from model.decoder.rope import apply_rope
from model.native import attention as attention_kernel
from model.native import elementwise
from model.native.threads import kernel_threads

# A weight matrix [out, in]: float32, kept quantized, or parts stacked by rows (separately quantized q, k, v).
Weight = torch.Tensor | QuantizedMatrix | tuple
Take = Callable[[str], Weight | None]   # a block's tensor by its GGUF name part ("attn_norm.weight"), or None
SCORES_BYTES = 16 * 2**20               # float32 scores of one batched attention product (KV groups at a time)
NATIVE_ROWS = 128                       # up to this many rows, a float32 matrix of int8-coded values is multiplied
                                        # by the native kernel (64 rows of SmolLM2's blocks: 166 ms against MKL's 223)


def linear(x: torch.Tensor, w: Weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., in] @ w^T (+ bias) -> [..., out] for any Weight (parts: their outputs side by side). A float32 matrix
    holding int8-coded values (the built-in model's) is multiplied as codes by the native kernel up to NATIVE_ROWS
    rows, or at any number of rows where torch has fewer threads than the kernel (the app keeps torch one core
    below); else by MKL. In the kernel a row's numbers do not depend on the rows beside it; parts it multiplies
    write their columns of one output (no copy to join them)."""
    if isinstance(w, torch.Tensor):
        coded = _coded(w, x.numel() // x.shape[-1])
        if coded is None:
            return F.linear(x, w, bias)
        out = torch.from_numpy(coded.linear(x.reshape(-1, x.shape[-1]).numpy(), made=True))   # [rows, out]
        return (out if bias is None else out.add_(bias)).view(*x.shape[:-1], -1)
    if isinstance(w, tuple):
        coded = [native_matrix(part, x.numel() // x.shape[-1]) for part in w]
        if all(c is not None for c in coded):
            flat = x.reshape(-1, x.shape[-1]).numpy()                              # [rows, in]
            out = np.empty((flat.shape[0], sum(c.shape[0] for c in coded)), np.float32)   # [rows, out]
            first = 0
            for c in coded:
                c.linear(flat, out[:, first:first + c.shape[0]], made=True)
                first += c.shape[0]
            joined = torch.from_numpy(out).view(*x.shape[:-1], -1)                 # [..., out]
        else:
            joined = torch.cat([linear(x, part) for part in w], dim=-1)             # [..., out]
        return joined if bias is None else joined.add_(bias)
    return w.linear(x, bias)


def native_matrix(w: Weight, rows: int):
    """The Int8Blocks that linear() multiplies `rows` rows of a single (not stacked) matrix w by, else None (torch
    multiplies it)."""
    if isinstance(w, QuantizedMatrix):
        return int8_blocks_of(w)
    return _coded(w, rows) if isinstance(w, torch.Tensor) else None


def runs_natively(w: Weight, rows: int) -> bool:
    """Whether linear multiplies `rows` rows by w on the native kernel's threads (a pass running so keeps torch's
    own operations on the calling thread: model.native.threads.torch_on_calling_thread)."""
    return native_matrix(w[0] if isinstance(w, tuple) else w, rows) is not None


def _coded(w: torch.Tensor, rows: int):
    """w's Int8Blocks where `rows` rows are multiplied by them, else None. Above NATIVE_ROWS MKL on every core is
    as fast (256 rows of SmolLM2: 0.84-0.90 s against 0.96 s a trace), MKL on one core of two is not (0.89 s against
    1.30 s; 512 rows 1.78 s against 2.61 s)."""
    if rows < 1 or (rows > NATIVE_ROWS and torch.get_num_threads() >= kernel_threads()):
        return None
    return int8_blocks_of(w)


def dense(w: Weight) -> torch.Tensor:
    """w as one float32 tensor [out, in] (a quantized matrix is dequantized: a new tensor)."""
    if isinstance(w, torch.Tensor):
        return w
    if isinstance(w, tuple):
        return torch.cat([dense(part) for part in w])
    return w.dequantized()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) * weight over the last axis, in float32 (activations reach ~22,500 at position 0)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class Norm:
    """RMSNorm (x / rms(x) * weight) or LayerNorm ((x - mean) / std * weight + bias) over the last axis."""

    def __init__(self, kind: str, weight: torch.Tensor, bias: torch.Tensor | None, eps: float):
        self.kind = kind
        self.weight = weight          # [D]
        self.bias = bias              # [D] or None
        self.eps = eps

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "rmsnorm":
            return rms_norm(x, self.weight, self.eps)
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)

    def statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, 1 / scale) of each row of x [..., D]: the norm is (x - mean) * inv_scale * weight (+ bias).
        RMSNorm: mean 0, scale sqrt(mean(x^2) + eps); LayerNorm: the mean, scale sqrt(var + eps)."""
        if self.kind == "rmsnorm":
            return torch.zeros_like(x[..., :1]), torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        mean = x.mean(-1, keepdim=True)                                         # [..., 1]
        return mean, torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + self.eps)


@dataclass(frozen=True)
class AttentionIntermediates:
    """Named tensors of one attention layer (TransformerLens style)."""

    q: torch.Tensor        # [H, T, hd] queries going into RoPE (after the bias and the q norm, when the model has them)
    k: torch.Tensor        # [KV, T, hd]
    v: torch.Tensor        # [KV, T, hd]
    q_rot: torch.Tensor    # [H, T, hd] after RoPE (== q without RoPE)
    k_rot: torch.Tensor    # [KV, T, hd]
    scores: torch.Tensor | None  # [H, T, T] before the mask (only when asked for)
    pattern: torch.Tensor  # [H, T, T]
    mixed: torch.Tensor    # [H, T, hd] pattern @ v per head (zero for switched-off heads), before the projection
    out: torch.Tensor      # [T, d_model] after the output projection (and its bias)


class Attention:
    """Grouped-query self-attention under a mask (half-split RoPE pairs: llama's Q/K rows were un-permuted at load)."""

    def __init__(self, cfg: ModelConfig, w_qkv: Weight, b_qkv: torch.Tensor | None, w_o: Weight,
                 b_o: torch.Tensor | None, q_norm: torch.Tensor | None = None, k_norm: torch.Tensor | None = None):
        self.cfg = cfg
        self.w_qkv = w_qkv          # [(H + 2 KV) hd, D]: W_q, W_k, W_v stacked by rows (float32: one matmul)
        self.b_qkv = b_qkv          # [(H + 2 KV) hd] or None
        self.w_o = w_o              # [D, H hd]
        self.b_o = b_o              # [D] or None
        self.q_norm = q_norm        # [hd] per-head RMSNorm weight of q (Qwen3) or None
        self.k_norm = k_norm        # [hd] or None

    def project(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [H, T, hd], k and v [KV, T, hd] of the normed stream h [T, D]: projections, biases, q/k norms."""
        return self.heads(linear(h, self.w_qkv, self.b_qkv))

    def heads(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [H, T, hd], k and v [KV, T, hd] (views, then q/k norms) of the fused projection qkv [T, (H + 2 KV) hd]."""
        cfg = self.cfg
        T = qkv.shape[0]
        q, k, v = qkv.split((cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim,
                             cfg.n_kv_heads * cfg.head_dim), dim=-1)
        q = q.view(T, cfg.n_heads, cfg.head_dim).transpose(0, 1)               # [H, T, hd]
        k = k.view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1)            # [KV, T, hd]
        v = v.view(T, cfg.n_kv_heads, cfg.head_dim).transpose(0, 1)            # [KV, T, hd]
        if self.q_norm is not None:
            q = rms_norm(q, self.q_norm, cfg.norm_eps)                         # [H, T, hd]
            k = rms_norm(k, self.k_norm, cfg.norm_eps)                         # [KV, T, hd]
        return q, k, v

    def rotate(self, x: torch.Tensor, cos, sin) -> torch.Tensor:
        """RoPE on q or k [n, T, hd]; the identity for a model without RoPE (cos is None)."""
        return x if cos is None else apply_rope(x, cos, sin)

    def __call__(self, h: torch.Tensor, cos, sin, mask: torch.Tensor, keep_scores: bool = False,
                 pattern_out: torch.Tensor | None = None, heads_off: torch.Tensor | None = None,
                 kv_out: tuple[torch.Tensor, torch.Tensor] | None = None) -> AttentionIntermediates:
        """Scores, softmax under the mask and the mix of values: in one native call (one_query_attention.c's
        prompt_attention: the rows split across the cores, the masked keys never multiplied; causal rows hold the
        generation step's numbers), else with torch (attend_with_torch). The forward pass writes the pattern straight
        into the trace (pattern_out, possibly float16) and keeps no scores; layer_detail asks for float32 scores and
        pattern. Either way the numbers are computed the same way.
        mask [T, T] bool: True where query i may attend key j.
        heads_off ([H] bool) zeroes those heads' mixed values before the output projection (head ablation).
        kv_out ([KV, T, hd] each) receives the rotated keys and the values (what a generation's cache holds)."""
        qkv = linear(h, self.w_qkv, self.b_qkv)                                # [T, (H + 2 KV) hd]
        q, k, v = self.heads(qkv)
        if self.q_norm is None and cos is not None and elementwise.available() and not qkv.requires_grad:
            cfg = self.cfg
            held = kv_out if kv_out is not None else tuple(torch.empty(cfg.n_kv_heads, qkv.shape[0], cfg.head_dim)
                                                            for _ in range(2))
            q_rot = torch.from_numpy(elementwise.split_rotate(                       # [H, T, hd]
                qkv.numpy(), cos.numpy(), sin.numpy(), cfg.n_heads, cfg.n_kv_heads, held[0].numpy(),
                held[1].numpy(), torch.get_num_threads()))
            k_rot, kv_out = held[0], held                                      # [KV, T, hd], values held beside
        else:
            q_rot = self.rotate(q, cos, sin)                                   # [H, T, hd]
            k_rot = self.rotate(k, cos, sin)                                   # [KV, T, hd]
            if kv_out is not None:
                kv_out[0].copy_(k_rot)
                kv_out[1].copy_(v)
        attend = self.attend_natively if attention_kernel.available() and not q_rot.requires_grad else \
            self.attend_with_torch
        scores, pattern, mixed = attend(q_rot, k_rot if kv_out is None else kv_out[0],
                                        v if kv_out is None else kv_out[1], mask, keep_scores, pattern_out)
        if heads_off is not None:
            mixed[heads_off] = 0.0
        return AttentionIntermediates(q, k, v, q_rot, k_rot, scores, pattern, mixed, self.output(mixed))

    def attend_natively(self, q_rot: torch.Tensor, k_rot: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                        keep_scores: bool, pattern_out: torch.Tensor | None):
        """(scores or None, pattern [H, T, T], mixed [H, T, hd]) in one native call (see __call__)."""
        cfg = self.cfg
        T = q_rot.shape[1]
        pattern = torch.empty(cfg.n_heads, T, T) if pattern_out is None else pattern_out   # [H, T, T]
        scores = torch.empty(cfg.n_heads, T, T) if keep_scores else None             # [H, T, T]
        mixed = attention_kernel.prompt_attention(
            q_rot.numpy(), k_rot.numpy(), v.numpy(), mask.numpy(), 1.0 / math.sqrt(cfg.head_dim), pattern.numpy(),
            None if scores is None else scores.numpy(), torch.get_num_threads())      # [T, H, hd]
        return scores, pattern, torch.from_numpy(mixed).transpose(0, 1)               # mixed [H, T, hd] (a view)

    def attend_with_torch(self, q_rot: torch.Tensor, k_rot: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                          keep_scores: bool, pattern_out: torch.Tensor | None):
        """(scores or None, pattern [H, T, T], mixed [H, T, hd]) in batched products: as many KV groups at a time as
        keep the float32 scores within SCORES_BYTES (every group of a 512-token text: two products a layer, not two
        per group), so memory stays bounded on long texts."""
        cfg = self.cfg
        T = q_rot.shape[1]
        g, hd = cfg.group_size, cfg.head_dim
        scale = 1.0 / math.sqrt(hd)
        scores = torch.empty(cfg.n_heads, T, T) if keep_scores else None       # [H, T, T]
        pattern = torch.empty(cfg.n_heads, T, T) if pattern_out is None else pattern_out  # [H, T, T]
        mixed = torch.empty(cfg.n_heads, T, hd)                                # [H, T, hd]
        hidden = ~mask                                                         # [T, T] True where j may not be seen
        step = max(1, SCORES_BYTES // (4 * g * T * T))                         # KV groups per batched product
        for first in range(0, cfg.n_kv_heads, step):
            kvs = slice(first, min(first + step, cfg.n_kv_heads))              # KV heads of this batch
            heads = slice(kvs.start * g, kvs.stop * g)                         # the query heads reading them
            n = kvs.stop - kvs.start
            q_groups = q_rot[heads].reshape(n, g * T, hd)                      # [n, g T, hd]
            group_scores = torch.bmm(q_groups, k_rot[kvs].transpose(1, 2)).mul_(scale).view(n * g, T, T)
            if keep_scores:
                scores[heads] = group_scores                                   # [n g, T, T]
            group_pattern = torch.softmax(group_scores.masked_fill_(hidden, float("-inf")), dim=-1)  # [n g, T, T]
            pattern[heads] = group_pattern
            torch.bmm(group_pattern.view(n, g * T, T), v[kvs], out=mixed[heads].view(n, g * T, hd))  # [n, g T, hd]
        return scores, pattern, mixed

    def output(self, mixed: torch.Tensor) -> torch.Tensor:
        """The output projection (and bias) of every head's mixed values [H, T, hd] -> [T, D]."""
        T = mixed.shape[1]
        return linear(mixed.transpose(0, 1).reshape(T, -1), self.w_o, self.b_o)

    def head_outputs(self, mixed: torch.Tensor) -> torch.Tensor:
        """Each head's share of the output projection (no bias) for one position's mixed [H, hd] -> [H, D]."""
        cfg = self.cfg
        w_o = dense(self.w_o).view(cfg.d_model, cfg.n_heads, cfg.head_dim)    # [D, H, hd]
        return torch.einsum("dhk,hk->hd", w_o, mixed)                          # [H, D]


@dataclass(frozen=True)
class MLPIntermediates:
    """Named tensors of one MLP: SwiGLU down(silu(gate) * up), or GELU down(gelu(up)) with gate None."""

    gate: torch.Tensor | None  # [T, F] gate projection (SwiGLU only)
    act: torch.Tensor          # [T, F] silu(gate), or gelu(up)
    up: torch.Tensor           # [T, F] up projection (with its bias)
    product: torch.Tensor      # [T, F] silu(gate) * up, or gelu(up): what the down projection reads
    out: torch.Tensor          # [T, d_model] down projection (with its bias)


class SwiGLU:
    """down(silu(gate(x)) * up(x)), gate and up fused into one matmul."""

    def __init__(self, w_gate_up: Weight, w_down: Weight):
        self.d_ff = w_down.shape[1]
        self.w_gate_up = w_gate_up      # [2 F, D]: W_gate, W_up stacked by rows
        self.w_down = w_down            # [D, F]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        return linear(self.product(linear(h, self.w_gate_up)), self.w_down)    # [T, D]

    def product(self, gate_up: torch.Tensor) -> torch.Tensor:
        """silu(gate) * up of gate_up [T, 2F] -> [T, F]: in one native call across the cores where the kernels are
        built (model/native/elementwise.py), else torch."""
        if elementwise.available() and gate_up.dim() == 2 and not gate_up.requires_grad:
            return torch.from_numpy(elementwise.swiglu_rows(gate_up.numpy(), torch.get_num_threads()))  # [T, F]
        gate, up = gate_up.split(self.d_ff, dim=-1)                      # [T, F] each, views of one buffer
        return F.silu(gate).mul_(up)                                     # [T, F]

    def parts(self, h: torch.Tensor) -> MLPIntermediates:
        """__call__ with every intermediate kept (the same product; silu(gate) on its own for the views)."""
        gate_up = linear(h, self.w_gate_up)                              # [T, 2F]
        gate, up = gate_up.split(self.d_ff, dim=-1)                      # [T, F] each
        product = self.product(gate_up)                                  # [T, F]
        return MLPIntermediates(gate, F.silu(gate), up, product, linear(product, self.w_down))


class GeluMLP:
    """down(gelu(up(x) + b_up)) + b_down, GELU with the tanh approximation (GPT-2)."""

    def __init__(self, w_up: Weight, b_up: torch.Tensor | None, w_down: Weight, b_down: torch.Tensor | None):
        self.d_ff = w_down.shape[1]
        self.w_up, self.b_up = w_up, b_up          # [F, D], [F]
        self.w_down, self.b_down = w_down, b_down  # [D, F], [D]

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        return linear(F.gelu(linear(h, self.w_up, self.b_up), approximate="tanh"), self.w_down, self.b_down)

    def parts(self, h: torch.Tensor) -> MLPIntermediates:
        up = linear(h, self.w_up, self.b_up)                            # [T, F]
        act = F.gelu(up, approximate="tanh")                             # [T, F]
        return MLPIntermediates(None, act, up, act, linear(act, self.w_down, self.b_down))


@dataclass(frozen=True)
class BlockIntermediates:
    """Named tensors of one block, in the order the block computes them."""

    x: torch.Tensor          # [T, D] residual stream in
    attn_in: torch.Tensor    # [T, D] attn_norm(x)
    attn: AttentionIntermediates
    mid: torch.Tensor        # [T, D] x + attn.out
    mlp_in: torch.Tensor     # [T, D] mlp_norm(mid)
    mlp: MLPIntermediates
    out: torch.Tensor        # [T, D] mid + mlp.out: the next block's input


class Block:
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, take: Take):
        """take(name) pops this block's tensor "<name>" (e.g. "attn_qkv.weight"). Float32 q/k/v and gate/up come
        fused; quantized ones come separately and are kept as parts."""
        def norm(name: str) -> Norm:
            return Norm(cfg.norm, take(f"{name}.weight"), take(f"{name}.bias"), cfg.norm_eps)

        def stacked(group: str, parts: tuple[str, ...]) -> Weight:
            fused = take(f"{group}.weight")
            return fused if fused is not None else tuple(take(f"{part}.weight") for part in parts)

        self.attn_norm = norm("attn_norm")
        self.attn = Attention(cfg, stacked("attn_qkv", ("attn_q", "attn_k", "attn_v")), take("attn_qkv.bias"),
                              take("attn_output.weight"), take("attn_output.bias"), take("attn_q_norm.weight"),
                              take("attn_k_norm.weight"))
        self.mlp_norm = norm("ffn_norm")
        if cfg.mlp == "swiglu":
            self.mlp = SwiGLU(stacked("ffn_gate_up", ("ffn_gate", "ffn_up")), take("ffn_down.weight"))
        else:
            self.mlp = GeluMLP(take("ffn_up.weight"), take("ffn_up.bias"), take("ffn_down.weight"),
                               take("ffn_down.bias"))

    def attention(self, x: torch.Tensor, cos, sin, mask, keep_scores: bool = False,
                  pattern_out: torch.Tensor | None = None, heads_off: torch.Tensor | None = None,
                  kv_out: tuple[torch.Tensor, torch.Tensor] | None = None) -> AttentionIntermediates:
        return self.attn(self.attn_norm(x), cos, sin, mask, keep_scores, pattern_out, heads_off, kv_out)

    def __call__(self, x: torch.Tensor, cos, sin, mask, pattern_out: torch.Tensor | None = None,
                 heads_off: torch.Tensor | None = None,
                 kv_out: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        x = x + self.attention(x, cos, sin, mask, pattern_out=pattern_out, heads_off=heads_off,
                               kv_out=kv_out).out                              # [T, D]
        return x + self.mlp(self.mlp_norm(x))                                  # [T, D]

    def parts(self, x: torch.Tensor, cos, sin, mask, keep_scores: bool = True) -> BlockIntermediates:
        """__call__ step by step with every intermediate kept (the same operations in the same order)."""
        attn_in = self.attn_norm(x)                                            # [T, D]
        attn = self.attn(attn_in, cos, sin, mask, keep_scores)
        mid = x + attn.out                                                     # [T, D]
        mlp_in = self.mlp_norm(mid)                                            # [T, D]
        mlp = self.mlp.parts(mlp_in)
        return BlockIntermediates(x, attn_in, attn, mid, mlp_in, mlp, mid + mlp.out)
