"""What every model says about its tokens, through its tokenizer: the decoders and the encoders inherit it."""
from __future__ import annotations


class TokenMethods:
    """encode / decode / a text's labels / a candidate's label through self.tokenizer."""

    tokenizer: object

    def encode(self, text: str) -> list[int]:
        """Token ids of text with what the file adds around it (a BOS; [CLS] ... [SEP]; ... </s>)."""
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_strings(self, ids: list[int]) -> list[str]:
        """Readable labels of ids read as one text (a character split over tokens labelled with its parts)."""
        return self.tokenizer.token_strings(ids)

    def token_labels(self, ids: list[int]) -> list[str]:
        """Each token's label on its own (candidates, not a text: a byte stays <0xNN>)."""
        return [self.tokenizer.token_label(i) for i in ids]
