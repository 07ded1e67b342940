"""Special tokens written in a text (control tokens such as <|im_start|>, user-defined ones): found before anything
else and kept whole, the longest at each position first, as tokenizers' added-token matching does."""
from __future__ import annotations

from collections.abc import Mapping

import regex


class SpecialSplitter:
    """Cuts text at the special-token strings of a vocabulary."""

    def __init__(self, specials: Mapping[str, int]):
        """specials: token text -> id (empty texts are ignored: they would match everywhere)."""
        self.ids = {text: token_id for text, token_id in specials.items() if text}
        by_length = sorted(self.ids, key=len, reverse=True)
        self._pattern = regex.compile("(" + "|".join(map(regex.escape, by_length)) + ")") if by_length else None

    def split(self, text: str) -> list[str]:
        """text as [ordinary, special, ordinary, special, ..., ordinary]: odd indexes are specials, evens may be
        empty."""
        return self._pattern.split(text) if self._pattern is not None else [text]
