"""Which input tokens the next-token prediction depends on: occlusion and gradient x input.

Both score the log-probability of one target token at the last position, log p(target | tokens):
- occlusion: each position in turn holds a replacement token instead of its own (by default the model's token for
  one space, occlusion_token), all of them one batch; the score is the change
  log p(target | occluded) - log p(target | tokens) (negative: the token supported the target);
- gradient x input: d log p(target) / d e_p . e_p for each position's token embedding e_p (the first-order estimate
  of removing the token), by torch autograd through the float32 forward (Decoder.run_blocks under autograd), the
  embeddings made a leaf tensor by a hook at hook_embed.
Neither is what attention shows: a head may look at a token the prediction does not depend on.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from model.analysis.token_args import check_id
from model.decoder.core import Decoder
from model.decoder.hooks import Hook

MAX_ATTRIBUTION_TOKENS = 128   # occlusion runs T texts of T tokens


def occlusion_token(lm: Decoder) -> int:
    """The default replacement: the model's single token for " " (a space), else its end-of-text token, else 0."""
    space = lm.encode(" ")[len(lm.tokenizer.prefix_ids):]
    if len(space) == 1:
        return int(space[0])
    return 0 if lm.eos_token_id is None else int(lm.eos_token_id)


def check_length(lm: Decoder, ids: list[int]) -> None:
    if len(ids) > MAX_ATTRIBUTION_TOKENS:
        raise ValueError(f"The text is {len(ids)} tokens; attribution here takes at most {MAX_ATTRIBUTION_TOKENS}.")


def occlusion(lm: Decoder, ids: list[int], target: int, replacement: int | None = None) -> np.ndarray:
    """[T] float64: log p(target) with position p replaced, minus log p(target) of the ids as they are."""
    check_length(lm, ids)
    target = check_id(lm, target, "The target")
    replacement = occlusion_token(lm) if replacement is None else check_id(lm, replacement, "The replacement")
    T = len(ids)
    variants = torch.tensor(ids).repeat(T + 1, 1)                                     # [T + 1, T]: row T unchanged
    variants[torch.arange(T), torch.arange(T)] = replacement
    scores = np.empty(T + 1)
    step = lm.variants_per_batch(T)
    with torch.inference_mode():
        pos = lm.positions(T)
        for first in range(0, T + 1, step):
            rows = variants[first:first + step]                                         # [B, T]
            x = lm.run_blocks(lm.embed_tokens(rows), pos)                               # [B, T, D]
            logits = lm.lm_head.logits(lm.final_norm(x[:, -1]))                         # [B, V]
            scores[first:first + rows.shape[0]] = torch.log_softmax(logits.double(), dim=-1)[:, target].numpy()
    return scores[:T] - scores[T]


def gradient_x_input(lm: Decoder, ids: list[int], target: int) -> np.ndarray:
    """[T] float64: the gradient of log p(target) with respect to each token embedding, dotted with it."""
    check_length(lm, ids)
    target = check_id(lm, target, "The target")
    leaf: list[torch.Tensor] = []

    def as_leaf(tokens: torch.Tensor, hook: Hook) -> torch.Tensor:                    # [1, T, D]
        leaf.append(tokens.detach().clone().requires_grad_(True))
        return leaf[0]

    with torch.enable_grad():
        x = lm.embed_tokens(torch.tensor([ids]), {"hook_embed": as_leaf})               # [1, T, D]
        final = lm.final_norm(lm.run_blocks(x, lm.positions(len(ids)))[0, -1])          # [D]
        torch.log_softmax(F.linear(final, lm.lm_head.dequantized()), dim=-1)[target].backward()
    return (leaf[0].grad[0].double() * leaf[0].detach()[0].double()).sum(-1).numpy()
