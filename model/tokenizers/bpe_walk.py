"""Byte-level BPE step by step: how one pre-token piece becomes tokens, one merge at a time (for teaching).

tiktoken does the real encoding. This walk repeats its algorithm in plain Python: start from the piece's bytes,
then again and again join the adjacent pair whose joined bytes have the lowest rank (the leftmost such pair on a
tie), until no joined pair is a token. The last step is what Tokenizer.encode gives for the piece (tested).
"""
from __future__ import annotations

from dataclasses import dataclass

from model.tokenizers.byte_bpe import Tokenizer

MAX_PIECE_BYTES = 256  # every step is kept: a piece of n bytes has up to n steps of up to n parts


@dataclass(frozen=True)
class Merge:
    """One BPE merge: the parts at index and index + 1 of the previous step became one token."""

    index: int
    left: bytes
    right: bytes
    rank: int  # rank (== token id) of left + right: the lowest of every adjacent pair in the previous step


@dataclass(frozen=True)
class BpeWalk:
    """A piece's way from single bytes to its tokens."""

    piece: str
    raw: bytes                          # the piece's UTF-8 bytes, less bytes no token covers (dropped, as encode does)
    steps: tuple[tuple[bytes, ...], ...]  # steps[0]: single bytes, steps[-1]: the final tokens
    ids: tuple[tuple[int, ...], ...]    # token id of every part of every step
    merges: tuple[Merge, ...]           # merges[i] turns steps[i] into steps[i + 1]
    special: bool = False               # a control token written whole (e.g. <|im_start|>): one id, no merges

    @property
    def tokens(self) -> tuple[int, ...]:
        """The final token ids."""
        return self.ids[-1]


def bpe_walk(tokenizer: Tokenizer, piece: str) -> BpeWalk:
    """Every merge that turns piece (one item of tokenizer.pieces(text)) into its tokens."""
    special = tokenizer.special_id(piece)
    if special is not None:
        raw = piece.encode("utf-8")
        return BpeWalk(piece, raw, ((raw,),), ((special,),), (), special=True)
    raw = piece.encode("utf-8", errors="surrogatepass").translate(None, tokenizer.missing_bytes)
    if len(raw) > MAX_PIECE_BYTES:
        raise ValueError(f"the piece is {len(raw)} bytes long; the step-by-step view takes up to {MAX_PIECE_BYTES}. "
                         "Pick a shorter word.")
    parts = [raw[i:i + 1] for i in range(len(raw))]
    steps = [tuple(parts)]
    merges: list[Merge] = []
    while len(parts) > 1:
        ranked = [(r, i) for i in range(len(parts) - 1)
                  if (r := tokenizer.rank(parts[i] + parts[i + 1])) is not None]
        if not ranked:
            break
        rank, i = min(ranked)
        merges.append(Merge(i, parts[i], parts[i + 1], rank))
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
        steps.append(tuple(parts))
    ids = tuple(tuple(tokenizer.rank(part) for part in step) for step in steps)
    return BpeWalk(piece, raw, tuple(steps), ids, tuple(merges))


def bpe_merge_steps(tokenizer: Tokenizer, piece: str) -> list[list[bytes]]:
    """The parts after each merge: first the single bytes, last the final tokens."""
    return [list(step) for step in bpe_walk(tokenizer, piece).steps]
