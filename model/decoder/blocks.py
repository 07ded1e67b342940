"""The parts a decoder block is assembled from, in torch (float32, eager attention; the attention's scores, softmax and
mix in one native call where the kernels are built, model/native/attention.py).

One class per concept, as in nanoGPT: Norm (RMSNorm or LayerNorm), Attention (grouped-query, optional q/k/v and
output biases, optional per-head q/k RMSNorm, RoPE or none), SwiGLU and GeluMLP, and the pre-norm Block. Which parts
a block uses comes from the ModelConfig the GGUF reader built. This is the one description of a block that every
full pass and analysis runs: a batch axis (B sequences; B = 1 for a trace), named hook points passed per call
(model/decoder/hooks.py: reading or changing any intermediate), optionally after shared past positions' keys and
values. Weights are read-only tensors shared by every caller; a call keeps all its state in local variables, so one
model can serve many Streamlit sessions at once.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.decoder.config import ModelConfig
from model.decoder.hooks import NO_HOOKS, PointHooks
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
    write their columns of one output (no copy to join them). Under autograd (x asks for gradients): F.linear on
    the dense weight."""
    if x.requires_grad:
        return F.linear(x, dense(w), bias)
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
class Record:
    """Where a one-sequence pass (B = 1) writes a layer's pattern [H, T, T] (float32 or float16) and its rotated keys
    and values [KV, T, hd] (the trace's own arrays: no copies); None: not kept."""

    pattern: torch.Tensor | None = None
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None


NO_RECORD = Record()
Past = tuple[torch.Tensor, torch.Tensor]   # rotated keys and values [KV, n, hd] of the n positions before a pass's


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
        """q [..., H, T, hd], k and v [..., KV, T, hd] of the normed stream h [..., T, D]."""
        return self.heads(linear(h, self.w_qkv, self.b_qkv))

    def heads(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [..., H, T, hd], k and v [..., KV, T, hd] (views, then q/k norms) of the fused projection
        qkv [..., T, (H + 2 KV) hd]."""
        cfg = self.cfg
        q, k, v = qkv.split((cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim,
                             cfg.n_kv_heads * cfg.head_dim), dim=-1)
        q = q.unflatten(-1, (cfg.n_heads, cfg.head_dim)).transpose(-3, -2)       # [..., H, T, hd]
        k = k.unflatten(-1, (cfg.n_kv_heads, cfg.head_dim)).transpose(-3, -2)    # [..., KV, T, hd]
        v = v.unflatten(-1, (cfg.n_kv_heads, cfg.head_dim)).transpose(-3, -2)    # [..., KV, T, hd]
        if self.q_norm is not None:
            q = rms_norm(q, self.q_norm, cfg.norm_eps)                         # [..., H, T, hd]
            k = rms_norm(k, self.k_norm, cfg.norm_eps)                         # [..., KV, T, hd]
        return q, k, v

    def rotate(self, x: torch.Tensor, cos, sin) -> torch.Tensor:
        """RoPE on q or k [..., n, T, hd]; the identity for a model without RoPE (cos is None)."""
        return x if cos is None else apply_rope(x, cos, sin)

    def __call__(self, h: torch.Tensor, cos, sin, mask: torch.Tensor, hooks: PointHooks = NO_HOOKS,
                 past: Past | None = None, record: Record = NO_RECORD) -> torch.Tensor:
        """The attention output [B, T, D] of the normed stream h [B, T, D] (positions n..n+T-1 after the n
        positions of past, whose keys and values every sequence shares; none: n = 0), cos / sin [T, hd/2] of its
        positions, mask [T, n + T] bool (True where query i may attend key j); hooks at its attn.* points.
        One sequence without past goes through native calls where the kernels are built: queries and keys rotated
        with the values beside them (elementwise.split_rotate), then scores, softmax and the mix of values in one
        call (one_query_attention.c's prompt_attention: rows across the cores, masked keys never multiplied; causal
        rows hold the generation step's numbers); else torch (attend_with_torch), the same maths."""
        cfg = self.cfg
        qkv = linear(h, self.w_qkv, self.b_qkv)                                # [B, T, (H + 2 KV) hd]
        B, T = qkv.shape[:2]
        fused = B == 1 and self.q_norm is None and cos is not None and not qkv.requires_grad and \
            elementwise.available() and not hooks.has(*QKV_POINTS)
        if fused:
            k_rot, v = (record.keys, record.values) if record.keys is not None else \
                (torch.empty(cfg.n_kv_heads, T, cfg.head_dim), torch.empty(cfg.n_kv_heads, T, cfg.head_dim))
            q_rot = torch.from_numpy(elementwise.split_rotate(                       # [H, T, hd]
                qkv[0].numpy(), cos.numpy(), sin.numpy(), cfg.n_heads, cfg.n_kv_heads, k_rot.numpy(), v.numpy(),
                torch.get_num_threads()))[None]
            k_rot, v = k_rot[None], v[None]                                    # [1, KV, T, hd] each
        else:
            q, k, v = self.heads(qkv)
            q, k, v = hooks("attn.hook_q", q), hooks("attn.hook_k", k), hooks("attn.hook_v", v)
            q_rot = hooks("attn.hook_rot_q", self.rotate(q, cos, sin))          # [B, H, T, hd]
            k_rot = hooks("attn.hook_rot_k", self.rotate(k, cos, sin))          # [B, KV, T, hd]
            if record.keys is not None:
                record.keys.copy_(k_rot[0])
                record.values.copy_(v[0])
        if past is not None:
            n = past[0].shape[1]
            k_rot = torch.cat((past[0].expand(B, cfg.n_kv_heads, n, cfg.head_dim), k_rot), dim=2)  # [B, KV, Tk, hd]
            v = torch.cat((past[1].expand(B, cfg.n_kv_heads, n, cfg.head_dim), v), dim=2)          # [B, KV, Tk, hd]
        native = B == 1 and past is None and not q_rot.requires_grad and attention_kernel.available()
        attend = self.attend_natively if native else self.attend_with_torch
        z = hooks("attn.hook_z", attend(q_rot, k_rot, v, mask, hooks, record))  # [B, H, T, hd]
        return self.output(z)

    def attend_natively(self, q_rot: torch.Tensor, k_rot: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                        hooks: PointHooks, record: Record) -> torch.Tensor:
        """z [1, H, T, hd] of one sequence in one native call (see __call__). Its pattern goes straight into
        record.pattern unless a hook reads the scores or the pattern; a hook that changes them has the pattern and
        z recomputed from what it left, with torch."""
        cfg = self.cfg
        T = q_rot.shape[2]
        hooked = hooks.has("attn.hook_attn_scores", "attn.hook_pattern")
        pattern = record.pattern if record.pattern is not None and not hooked else torch.empty(cfg.n_heads, T, T)
        scores = torch.empty(cfg.n_heads, T, T) if hooks.has("attn.hook_attn_scores") else None   # [H, T, T]
        mixed = attention_kernel.prompt_attention(
            q_rot[0].numpy(), k_rot[0].numpy(), v[0].numpy(), mask.numpy(), 1.0 / math.sqrt(cfg.head_dim),
            pattern.numpy(), None if scores is None else scores.numpy(), torch.get_num_threads())   # [T, H, hd]
        z = torch.from_numpy(mixed).transpose(0, 1)[None]                            # [1, H, T, hd] (a view)
        if not hooked:
            return z
        pattern, recompute = pattern[None], False                                    # [1, H, T, T]
        if scores is not None:
            scores, recompute = hooks.changes("attn.hook_attn_scores", scores[None])
            if recompute:
                pattern = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        pattern, changed = hooks.changes("attn.hook_pattern", pattern)
        if recompute or changed:
            z = self.mix(pattern, v)
        if record.pattern is not None:
            record.pattern.copy_(pattern[0])
        return z

    def attend_with_torch(self, q_rot: torch.Tensor, k_rot: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                          hooks: PointHooks, record: Record) -> torch.Tensor:
        """z [B, H, T, hd] in batched products: as many KV groups at a time as keep the float32 scores within
        SCORES_BYTES (every group of a 512-token text: two products a layer, not two per group), so memory stays
        bounded on long texts; all of them where a hook reads the scores or the pattern. Differentiable."""
        cfg = self.cfg
        B, _, T, hd = q_rot.shape
        Tk, g = k_rot.shape[2], cfg.group_size
        hidden = ~mask                                                         # [T, Tk] True where j may not be seen
        hooked = hooks.has("attn.hook_attn_scores", "attn.hook_pattern")
        step = cfg.n_kv_heads if hooked else max(1, SCORES_BYTES // (4 * B * g * T * Tk))   # KV groups a product
        z = []
        for first in range(0, cfg.n_kv_heads, step):
            kvs = slice(first, min(first + step, cfg.n_kv_heads))              # KV heads of this batch
            heads = slice(kvs.start * g, kvs.stop * g)                         # the query heads reading them
            n = kvs.stop - kvs.start
            q_groups = q_rot[:, heads].reshape(B, n, g * T, hd)                # [B, n, g T, hd]
            scores = torch.matmul(q_groups, k_rot[:, kvs].transpose(-1, -2)).mul(1.0 / math.sqrt(hd))
            scores = hooks("attn.hook_attn_scores", scores.view(B, n * g, T, Tk))   # [B, n g, T, Tk]
            pattern = hooks("attn.hook_pattern", torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1))
            if record.pattern is not None:
                record.pattern[heads] = pattern[0]
            z.append(self.mix(pattern, v[:, kvs]))                             # [B, n g, T, hd]
        return z[0] if len(z) == 1 else torch.cat(z, dim=1)

    def mix(self, pattern: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """pattern [B, n g, T, Tk] @ each query head's KV head of v [B, n, Tk, hd] -> z [B, n g, T, hd]."""
        B, heads, T, Tk = pattern.shape
        n = v.shape[1]
        return torch.matmul(pattern.reshape(B, n, heads // n * T, Tk), v).view(B, heads, T, -1)

    def output(self, z: torch.Tensor) -> torch.Tensor:
        """The output projection (and bias) of every head's z [..., H, T, hd] -> [..., T, D]."""
        return linear(z.transpose(-3, -2).flatten(-2), self.w_o, self.b_o)

    def head_outputs(self, z: torch.Tensor) -> torch.Tensor:
        """Each head's share of the output projection (no bias) for one position's z [H, hd] -> [H, D]."""
        cfg = self.cfg
        w_o = dense(self.w_o).view(cfg.d_model, cfg.n_heads, cfg.head_dim)    # [D, H, hd]
        return torch.einsum("dhk,hk->hd", w_o, z)                              # [H, D]


QKV_POINTS = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k")


class SwiGLU:
    """down(silu(gate(x)) * up(x)), gate and up fused into one matmul."""

    def __init__(self, w_gate_up: Weight, w_down: Weight):
        self.d_ff = w_down.shape[1]
        self.w_gate_up = w_gate_up      # [2 F, D]: W_gate, W_up stacked by rows
        self.w_down = w_down            # [D, F]

    def __call__(self, h: torch.Tensor, hooks: PointHooks = NO_HOOKS) -> torch.Tensor:
        """[..., T, D] -> [..., T, D]; hooks at mlp.hook_pre (gate), mlp.hook_pre_linear (up), mlp.hook_post."""
        gate_up = linear(h, self.w_gate_up)                              # [..., T, 2F]
        gate, up = gate_up.split(self.d_ff, dim=-1)                      # [..., T, F] each, views of one buffer
        gate, changed = hooks.changes("mlp.hook_pre", gate)
        up, changed_too = hooks.changes("mlp.hook_pre_linear", up)
        product = F.silu(gate) * up if changed or changed_too else self.product(gate_up)   # [..., T, F]
        return linear(hooks("mlp.hook_post", product), self.w_down)

    def product(self, gate_up: torch.Tensor) -> torch.Tensor:
        """silu(gate) * up of gate_up [..., 2F] -> [..., F]: in one native call across the cores where the kernels
        are built (model/native/elementwise.py), else torch."""
        if elementwise.available() and not gate_up.requires_grad:
            rows = gate_up.reshape(-1, gate_up.shape[-1]).numpy()                                   # [rows, 2F]
            product = elementwise.swiglu_rows(rows, torch.get_num_threads())                        # [rows, F]
            return torch.from_numpy(product).view(*gate_up.shape[:-1], self.d_ff)
        gate, up = gate_up.split(self.d_ff, dim=-1)                      # [..., F] each
        return F.silu(gate) * up                                         # [..., F]


class GeluMLP:
    """down(gelu(up(x) + b_up)) + b_down, GELU with the tanh approximation (GPT-2)."""

    def __init__(self, w_up: Weight, b_up: torch.Tensor | None, w_down: Weight, b_down: torch.Tensor | None):
        self.d_ff = w_down.shape[1]
        self.w_up, self.b_up = w_up, b_up          # [F, D], [F]
        self.w_down, self.b_down = w_down, b_down  # [D, F], [D]

    def __call__(self, h: torch.Tensor, hooks: PointHooks = NO_HOOKS) -> torch.Tensor:
        """[..., T, D] -> [..., T, D]; hooks at mlp.hook_pre (up, before GELU) and mlp.hook_post."""
        up = hooks("mlp.hook_pre", linear(h, self.w_up, self.b_up))     # [..., T, F]
        act = hooks("mlp.hook_post", F.gelu(up, approximate="tanh"))    # [..., T, F]
        return linear(act, self.w_down, self.b_down)


class Block:
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x)), with hooks at its named points."""

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

    def __call__(self, x: torch.Tensor, cos, sin, mask: torch.Tensor, hooks: PointHooks = NO_HOOKS,
                 past: Past | None = None, record: Record = NO_RECORD) -> torch.Tensor:
        """The block's output [B, T, D] for the stream x [B, T, D] entering it (cos, sin, mask, past, record: see
        Attention.__call__; hooks: this block's points, model.decoder.hooks.BLOCK_POINTS)."""
        x = hooks("hook_resid_pre", x)                                                 # [B, T, D]
        attn_in = hooks("ln1.hook_normalized", self.attn_norm(x))                      # [B, T, D]
        attn_out = hooks("hook_attn_out", self.attn(attn_in, cos, sin, mask, hooks, past, record))
        mid = hooks("hook_resid_mid", x + attn_out)                                    # [B, T, D]
        mlp_out = hooks("hook_mlp_out", self.mlp(hooks("ln2.hook_normalized", self.mlp_norm(mid)), hooks))
        return hooks("hook_resid_post", mid + mlp_out)                                 # [B, T, D]
