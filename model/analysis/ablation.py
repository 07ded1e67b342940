"""Head ablation: switch attention heads off and see how the next-token prediction changes.

A switched-off head adds nothing to its layer's attention output (its z, pattern @ v, is zeroed before the output
projection, the same as zeroing its columns of o_proj): a hook at blocks.{layer}.attn.hook_z for this call only,
so the shared weights are never touched and concurrent calls are safe. The blocks before the first ablated layer
are unchanged, so the pass restarts from the trace's nearest checkpoint.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from model.decoder.core import Decoder
from model.decoder.hooks import Hook
from model.decoder.trace import ForwardTrace


def heads_off_by_layer(lm: Decoder, heads: Iterable[tuple[int, int]]) -> dict[int, torch.Tensor]:
    """{layer: [n_heads] bool, True for the heads to switch off} from (layer, head) pairs."""
    cfg = lm.config
    off: dict[int, torch.Tensor] = {}
    for pair in heads:
        try:
            layer, head = pair
        except (TypeError, ValueError):
            raise ValueError(f"each head must be a (layer, head) pair of integers, got {pair!r}") from None
        if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in (layer, head)):
            raise ValueError(f"each head must be a (layer, head) pair of integers, got {pair!r}")
        layer, head = int(layer), int(head)
        if not (0 <= layer < cfg.n_layers and 0 <= head < cfg.n_heads):
            raise ValueError(f"head (layer {layer}, head {head}) does not exist: layers are 0 to {cfg.n_layers - 1}, "
                             f"heads 0 to {cfg.n_heads - 1}")
        off.setdefault(layer, torch.zeros(cfg.n_heads, dtype=torch.bool))[head] = True
    return off


def ablate_heads(lm: Decoder, trace: ForwardTrace, heads: Iterable[tuple[int, int]]) -> np.ndarray:
    """Next-token logits ([vocab_size] float32) with the given (layer, head) pairs switched off.

    With no heads the result is the trace's own next-token logits.
    """
    off = heads_off_by_layer(lm, heads)
    if not off:
        return trace.next_token_logits.copy()

    def switch_off(z: torch.Tensor, hook: Hook) -> torch.Tensor:                 # [1, H, T, hd]
        return z.masked_fill(off[hook.layer][None, :, None, None], 0.0)

    with torch.inference_mode():
        x = lm.rerun(trace, min(off), hooks={f"blocks.{layer}.attn.hook_z": switch_off for layer in off})
        return lm.lm_head.logits(lm.final_norm(x[0, -1])).numpy()
