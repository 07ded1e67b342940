"""What every tokenizer read from a GGUF offers (byte-level BPE and SentencePiece alike), and the GGUF token types."""
from __future__ import annotations

from enum import IntEnum
from typing import Protocol


class TokenType(IntEnum):
    """tokenizer.ggml.token_type values (llama.cpp's LLAMA_TOKEN_TYPE_*)."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class Tokenizer(Protocol):
    """The interface the decoder, the pages and the step-by-step merge walk (bpe_walk) use.

    Parts are what the merge walk joins: byte strings, spelled as token_bytes spells tokens.
    """

    vocab_size: int
    bos_token_id: int | None          # prepended by encode when the file asks for it (then prefix_ids == (bos,))
    eos_token_id: int | None          # end of sequence, None when the file names none
    prefix_ids: tuple[int, ...]       # what encode puts before the text
    special_ids: frozenset[int]       # tokens matched whole in the text (control, user-defined)

    @property
    def missing_bytes(self) -> bytes:
        """Byte values no token covers (dropped by encode)."""

    def encode(self, text: str) -> list[int]:
        """Token ids of text, after prefix_ids."""

    def decode(self, ids: list[int]) -> str:
        """The text of token ids (control tokens as written)."""

    def token_strings(self, ids: list[int]) -> list[str]:
        """Readable labels of ids read as one text (labels.sequence_labels of their bytes)."""

    def token_label(self, token_id: int) -> str:
        """One token's readable label on its own (labels.readable_token of its bytes)."""

    def token_bytes(self, token_id: int) -> bytes:
        """What a token stands for in the text (a SentencePiece '▁' is a space, a byte token its byte)."""

    def pieces(self, text: str) -> list[str]:
        """text cut where merges never cross: special-token strings whole, the rest split for merging."""

    def special_id(self, piece: str) -> int | None:
        """The id of a control / user-defined token written as piece, None for ordinary text."""

    def initial_parts(self, piece: str) -> list[bytes]:
        """The merge walk's first step for one of pieces(text): its bytes or characters, each a token."""

    def rank(self, part: bytes) -> int | None:
        """Merge priority of a part (lower merges first), None when no ordinary token has it."""

    def part_id(self, part: bytes) -> int | None:
        """The token id of a part, None when it is not a token."""
