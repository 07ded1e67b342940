"""What the Efficient attention page computes, through the shared byte-bounded caches (app_pages/_caches.py).

Every value is keyed by the model's identity (its source), the text, the token limit and the settings that change
it (a mask's kind and only the sizes that kind reads), so a switch back is a cache hit and nothing hidden is left
out of a key. Model passes run one at a time (caches.computed). A masked pass keeps only what the page shows (the
per-token log-probabilities and the next-token logits), never its [L, H, T, T] attention.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from app_core import schemas as S
from app_core.examples import load_examples
from app_pages import _caches as caches
from model.lessons import sparse_masks
from model.lessons.flash_attention import FlashRun, flash_attention, softmax_attention
from model.lessons.sampling import softmax

STORY_TITLE = "A long story (attention sinks)"     # the example text the masks view offers to load


@dataclass(frozen=True, eq=False)
class PassResult:
    """What the page keeps of one forward pass: how well it predicted each next token, and after the last."""

    logprobs: np.ndarray            # [T - 1] float32 log p(token t+1 | tokens <= t)
    next_logits: np.ndarray         # [vocab_size] float32 after the last token


USES = {"full": (), "window": ("window",), "sink": ("window", "sinks"), "strided": ("stride",),
        "dilated": ("window", "stride")}     # the sizes each mask kind reads


def mask_key(kind: str, window: int, sinks: int, stride: int) -> tuple[str, int, int, int]:
    """(kind, window, sinks, stride) with the sizes this kind does not read set to 0: one key per distinct mask."""
    sizes = {"window": window, "sinks": sinks, "stride": stride}
    return (kind, *(int(sizes[name]) if name in USES[kind] else 0 for name in ("window", "sinks", "stride")))


def full_pass(text: str) -> PassResult:
    """The model's own (causal) pass on text: from the shared trace."""
    lm = caches.get_model()
    trace = caches.get_trace(text)
    return caches.cached("eff_full", (caches.model_id(lm), text, caches.token_limit()),
                         lambda: PassResult(caches.computed(lambda: lm.token_logprobs(trace)), trace.next_token_logits))


def masked_pass(text: str, settings: tuple[str, int, int, int]) -> PassResult:
    """One forward pass of text with the mask of these settings (mask_key) applied in every layer."""
    lm = caches.get_model()
    if settings[0] == "full":
        return full_pass(text)

    def compute() -> PassResult:
        def run() -> PassResult:
            kind, window, sinks, stride = settings
            T = min(len(lm.encode(text)), caches.token_limit())
            allowed = sparse_masks.build_mask(kind, T, window, sinks, stride)
            trace = lm.run(text, max_tokens=caches.token_limit(), allowed=allowed)
            return PassResult(lm.token_logprobs(trace), trace.next_token_logits)
        return caches.computed(run)

    return caches.cached("eff_mask", (caches.model_id(lm), text, caches.token_limit(), settings), compute)


def cached_masked_pass(text: str, settings: tuple[str, int, int, int]) -> PassResult | None:
    """masked_pass's result if it is cached already, else None (nothing is computed)."""
    if settings[0] == "full":
        return full_pass(text)
    key = (caches.model_id(), text, caches.token_limit(), settings)
    return caches.caches()["derived"].peek(("eff_mask", key))


def counterpart(settings: tuple[str, int, int, int], sinks: int) -> tuple[str, int, int, int]:
    """The StreamingLLM comparison of a window mask: the same window with the first `sinks` tokens kept, and of a
    window + sinks mask the same window without them."""
    kind, window, _, _ = settings
    return mask_key("window", window, 0, 0) if kind == "sink" else mask_key("sink", window, sinks, 0)


def switch_mask(kind: str) -> None:
    """Button callback: show another kind of mask (the masks view's setting)."""
    st.session_state[S.EFFICIENT.by_name("mask").key] = kind


def kv_pass(text: str, n_kv_heads: int) -> PassResult:
    """The pass of the model with its KV heads regrouped into n_kv_heads (Decoder.with_kv_heads)."""
    lm = caches.get_model()
    if n_kv_heads == lm.config.n_kv_heads:
        return full_pass(text)

    def compute() -> PassResult:
        def run() -> PassResult:
            twin = lm.with_kv_heads(n_kv_heads)
            trace = twin.run(text, max_tokens=caches.token_limit())
            return PassResult(twin.token_logprobs(trace), trace.next_token_logits)
        return caches.computed(run)

    return caches.cached("eff_kv", (caches.model_id(lm), text, caches.token_limit(), n_kv_heads), compute)


def flash_run(text: str, layer: int, head: int, block: int) -> FlashRun:
    """FlashAttention tile by tile on one head's real q, k, v (after RoPE) of this text."""
    lm = caches.get_model()
    detail = caches.get_layer_detail(text, layer)
    kv = head // lm.config.group_size
    return caches.cached("eff_flash", (caches.model_id(lm), text, caches.token_limit(), layer, head, block),
                         lambda: flash_attention(detail.q_rot[head], detail.k_rot[kv], detail.v[kv], block))


def flash_differences(text: str, layer: int, head: int, block: int) -> tuple[float, float]:
    """Largest difference of the tiled output from ordinary float64 softmax attention on the same q, k, v, and from
    the model's own float32 forward (its pattern times v)."""
    lm = caches.get_model()
    detail = caches.get_layer_detail(text, layer)
    run = flash_run(text, layer, head, block)
    kv = head // lm.config.group_size

    def compute() -> tuple[float, float]:
        exact = softmax_attention(detail.q_rot[head], detail.k_rot[kv], detail.v[kv])              # [T, hd]
        model = detail.pattern[head].astype(np.float64) @ detail.v[kv].astype(np.float64)          # [T, hd]
        return float(np.abs(run.out - exact).max()), float(np.abs(run.out - model).max())

    return caches.cached("eff_flash_diff", (caches.model_id(lm), text, caches.token_limit(), layer, head, block),
                         compute)


def largest_change(a: PassResult, b: PassResult) -> float:
    """The largest difference between two passes' log-probabilities of the same text's tokens."""
    return float(np.abs(a.logprobs.astype(np.float64) - b.logprobs).max())


def next_token_table(results: dict[str, PassResult], k: int) -> tuple[list[int], dict[str, np.ndarray]]:
    """The k most probable next tokens of the first result, and their probabilities under every result."""
    probs = {name: softmax(r.next_logits) for name, r in results.items()}
    top = [int(i) for i in np.argsort(next(iter(probs.values())))[::-1][:k]]
    return top, {name: p[top] for name, p in probs.items()}


def story_text() -> str | None:
    """The long example story (None if the examples file lacks it)."""
    return next((e["text"] for e in load_examples() if e["title"] == STORY_TITLE), None)


def load_story() -> None:
    """Button callback: the long story becomes the text (the masks view needs a few hundred tokens)."""
    text = story_text()
    if text is not None:
        st.session_state[S.TEXT.key] = text
        st.session_state[S.QUERY.key] = None
