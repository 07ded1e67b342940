"""What BERT and T5 models share: the tokenizer's methods, the token limit, the texts they refuse, attention kept as
float32 or, for long texts, float16."""
from __future__ import annotations

import numpy as np
import torch

from model.decoder.config import DEFAULT_MAX_TOKENS, FLOAT32_ATTENTION_BYTES
from model.tokenizers.delegate import TokenMethods


class TokenizerMethods(TokenMethods):
    """TokenMethods, and the checks of a run's text and token limit."""

    tokenizer: object
    config: object

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    def check_max_tokens(self, max_tokens: int | None) -> int:
        limit = self.config.max_positions
        if max_tokens is None:
            return min(DEFAULT_MAX_TOKENS, limit)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or \
                not 2 <= max_tokens <= limit:
            raise ValueError(f"max_tokens must be an integer from 2 to {limit} (the model's context length), "
                             f"got {max_tokens!r}")
        return int(max_tokens)

    def text_ids(self, text: str, max_tokens: int | None) -> tuple[list[int], int]:
        """(ids cut to max_tokens, keeping the special tokens at both ends; the whole text's count): ValueError
        for an empty text."""
        max_tokens = self.check_max_tokens(max_tokens)
        if not isinstance(text, str) or not text.strip():
            raise ValueError("The text is empty. Type some text (at least one non-space character) to run the model.")
        ids = self.encode(text)
        prefix, suffix = len(self.tokenizer.prefix_ids), len(self.tokenizer.suffix_ids)
        if len(ids) == prefix + suffix:
            raise ValueError("The text has no tokens this model can read. Type some ordinary text.")
        if len(ids) <= max_tokens:
            return ids, len(ids)
        return ids[:max_tokens - suffix] + ids[len(ids) - suffix:], len(ids)


def attention_buffer(shape: tuple[int, ...]) -> np.ndarray:
    """An empty attention array: float32 up to FLOAT32_ATTENTION_BYTES, float16 above."""
    dtype = np.float32 if 4 * int(np.prod(shape)) <= FLOAT32_ATTENTION_BYTES else np.float16
    return np.empty(shape, dtype=dtype)


def read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def as_numpy(x: torch.Tensor) -> np.ndarray:
    """A float32 copy of a tensor, read-only."""
    return read_only(x.detach().numpy().astype(np.float32, copy=True))
