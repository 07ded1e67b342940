"""The arguments the circuit analyses share: a text or token ids to run, and one token named by id or by its text."""
from __future__ import annotations

import numpy as np

from model.decoder.core import Decoder


def input_ids(lm: Decoder, text_or_ids, what: str = "text") -> list[int]:
    """Token ids of a text (encoded, with the model's BOS when it adds one) or of a list of ids (used as given)."""
    if isinstance(text_or_ids, str):
        if not text_or_ids.strip():
            raise ValueError(f"The {what} is empty. Type some text (at least one non-space character).")
        ids = lm.encode(text_or_ids)
        if len(ids) == len(lm.tokenizer.prefix_ids):
            raise ValueError(f"The {what} has no tokens this model can read. Type some ordinary text.")
    else:
        ids = list(text_or_ids)
        if not ids:
            raise ValueError(f"The {what} has no tokens: give a text or at least one token id.")
        for i in ids:
            check_id(lm, i, f"each token of the {what}")
    if len(ids) > lm.config.max_positions:
        raise ValueError(f"The {what} has {len(ids)} tokens; this model reads at most {lm.config.max_positions}.")
    return [int(i) for i in ids]


def check_id(lm: Decoder, token, what: str) -> int:
    """token as an int id of the vocabulary, else ValueError."""
    V = lm.config.vocab_size
    if isinstance(token, bool) or not isinstance(token, (int, np.integer)) or not 0 <= token < V:
        raise ValueError(f"{what} must be a token id from 0 to {V - 1}, got {token!r}")
    return int(token)


def one_token_id(lm: Decoder, token, what: str) -> int:
    """The id of token: an id, or a string this model's tokenizer reads as exactly one token (no BOS counted)."""
    if isinstance(token, str):
        ids = lm.encode(token)[len(lm.tokenizer.prefix_ids):]
        if len(ids) != 1:
            pieces = " | ".join(lm.token_strings(ids)) or "no tokens"
            raise ValueError(f"The {what} {token!r} is {len(ids)} tokens for this model ({pieces}); give text that "
                             f"is one token (a leading space often belongs to the word) or a token id.")
        return int(ids[0])
    return check_id(lm, token, f"The {what}")
