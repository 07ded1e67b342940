"""What the Efficient attention page computes: the model's pass under a sparse mask, with its KV heads regrouped,
and FlashAttention tile by tile on one head's real q, k, v. A masked pass keeps only what the page shows (the
per-token log-probabilities and the next-token logits), never its [L, H, T, T] attention."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.maths import sparse_masks
from model.maths.flash_attention import FlashRun, flash_attention, softmax_attention
from model.maths.sampling import softmax

USES = {"full": (), "window": ("window",), "sink": ("window", "sinks"), "strided": ("stride",),
        "dilated": ("window", "stride")}     # the sizes each mask kind reads


@dataclass(frozen=True, eq=False)
class PassResult:
    """What the page keeps of one forward pass: how well it predicted each next token, and after the last."""

    logprobs: np.ndarray            # [T - 1] float32 log p(token t+1 | tokens <= t)
    next_logits: np.ndarray         # [vocab_size] float32 after the last token


def mask_key(kind: str, window: int, sinks: int, stride: int) -> tuple[str, int, int, int]:
    """(kind, window, sinks, stride) with the sizes this kind does not read set to 0: one key per distinct mask."""
    sizes = {"window": window, "sinks": sinks, "stride": stride}
    return (kind, *(int(sizes[name]) if name in USES[kind] else 0 for name in ("window", "sinks", "stride")))


def counterpart(settings: tuple[str, int, int, int], sinks: int) -> tuple[str, int, int, int]:
    """The StreamingLLM comparison of a window mask: the same window with the first `sinks` tokens kept, and of a
    window + sinks mask the same window without them."""
    kind, window, _, _ = settings
    return mask_key("window", window, 0, 0) if kind == "sink" else mask_key("sink", window, sinks, 0)


def full_pass(ws, text: str) -> PassResult:
    """The model's own (causal) pass on text: from the shared trace."""
    trace = ws.trace(text)
    return PassResult(ws.model.token_logprobs(trace), trace.next_token_logits)


def masked_pass(ws, text: str, settings: tuple[str, int, int, int]) -> PassResult:
    """One forward pass of text with the mask of these settings (mask_key) applied in every layer."""
    if settings[0] == "full":
        return full_pass(ws, text)
    kind, window, sinks, stride = settings
    T = min(len(ws.lm.encode(text)), ws.max_tokens)
    allowed = sparse_masks.build_mask(kind, T, window, sinks, stride)
    trace = ws.model.run(text, max_tokens=ws.max_tokens, allowed=allowed)
    return PassResult(ws.model.token_logprobs(trace), trace.next_token_logits)


def kv_pass(ws, text: str, n_kv_heads: int) -> PassResult:
    """The pass of the model with its KV heads regrouped into n_kv_heads (Decoder.with_kv_heads)."""
    if n_kv_heads == ws.lm.config.n_kv_heads:
        return full_pass(ws, text)
    with ws.alone():
        twin = ws.lm.with_kv_heads(n_kv_heads)
        trace = twin.run(text, max_tokens=ws.max_tokens)
        return PassResult(twin.token_logprobs(trace), trace.next_token_logits)


def flash_run(ws, text: str, layer: int, head: int, block: int) -> FlashRun:
    """FlashAttention tile by tile on one head's real q, k, v (after RoPE) of this text."""
    detail = ws.layer_detail(text, layer)
    kv = ws.lm.config.kv_head_of(head)
    return flash_attention(detail.q_rot[head], detail.k_rot[kv], detail.v[kv], block)


def flash_differences(ws, text: str, layer: int, head: int, block: int) -> tuple[float, float]:
    """Largest difference of the tiled output from ordinary float64 softmax attention on the same q, k, v, and from
    the model's own float32 forward (its pattern times v)."""
    detail = ws.layer_detail(text, layer)
    run = ws.compute(flash_run, text, layer, head, block)
    kv = ws.lm.config.kv_head_of(head)
    exact = softmax_attention(detail.q_rot[head], detail.k_rot[kv], detail.v[kv])              # [T, hd]
    model = detail.pattern[head].astype(np.float64) @ detail.v[kv].astype(np.float64)          # [T, hd]
    return float(np.abs(run.out - exact).max()), float(np.abs(run.out - model).max())


def largest_change(a: PassResult, b: PassResult) -> float:
    """The largest difference between two passes' log-probabilities of the same text's tokens."""
    return float(np.abs(a.logprobs.astype(np.float64) - b.logprobs).max())


def next_token_table(results: dict[str, PassResult], k: int) -> tuple[list[int], dict[str, np.ndarray]]:
    """The k most probable next tokens of the first result, and their probabilities under every result."""
    probs = {name: softmax(r.next_logits) for name, r in results.items()}
    top = [int(i) for i in np.argsort(next(iter(probs.values())))[::-1][:k]]
    return top, {name: p[top] for name, p in probs.items()}
