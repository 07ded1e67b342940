"""BPE step by step: how one piece of a text becomes tokens, one merge at a time (for teaching).

The tokenizers do the real encoding. This walk repeats their algorithm in plain Python: start from the piece's
initial parts (byte-level BPE: its bytes; SentencePiece: its characters, a character without a token as its byte
tokens), then again and again join the adjacent pair whose joined part has the lowest rank (byte-level BPE: the
lowest token id, i.e. the earliest merge; SentencePiece: the highest score), the leftmost such pair on a tie, until
no joined pair is a token. The last step is what the tokenizer's encode gives for the piece (tested).
"""
from __future__ import annotations

from dataclasses import dataclass

from model.tokenizers.base import Tokenizer

MAX_PIECE_BYTES = 256  # every step is kept: a piece of n bytes has up to n steps of up to n parts


@dataclass(frozen=True)
class Merge:
    """One BPE merge: the parts at index and index + 1 of the previous step became one token."""

    index: int
    left: bytes
    right: bytes
    rank: int      # rank of left + right: the lowest of every adjacent pair in the previous step
    token_id: int  # the token left + right (byte-level BPE: == rank)


@dataclass(frozen=True)
class BpeWalk:
    """A piece's way from single bytes to its tokens."""

    piece: str
    raw: bytes                          # steps[0] joined: the piece's bytes, less bytes no token covers (dropped)
    steps: tuple[tuple[bytes, ...], ...]  # steps[0]: initial parts (bytes or characters), steps[-1]: the final tokens
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
    parts = tokenizer.initial_parts(piece)
    raw = b"".join(parts)
    if len(raw) > MAX_PIECE_BYTES:
        raise ValueError(f"the piece is {len(raw)} bytes long; the step-by-step view takes up to {MAX_PIECE_BYTES}. "
                         "Pick a shorter word.")
    steps = [tuple(parts)]
    merges: list[Merge] = []
    while len(parts) > 1:
        ranked = [(r, i) for i in range(len(parts) - 1)
                  if (r := tokenizer.rank(parts[i] + parts[i + 1])) is not None]
        if not ranked:
            break
        rank, i = min(ranked)
        merges.append(Merge(i, parts[i], parts[i + 1], rank, tokenizer.part_id(parts[i] + parts[i + 1])))
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
        steps.append(tuple(parts))
    ids = tuple(tuple(tokenizer.part_id(part) for part in step) for step in steps)
    return BpeWalk(piece, raw, tuple(steps), ids, tuple(merges))


def piece_token_count(tokenizer: Tokenizer, piece: str) -> int | None:
    """How many tokens piece (one item of tokenizer.pieces(text)) becomes; None when it is too long to walk."""
    try:
        return len(bpe_walk(tokenizer, piece).tokens)
    except ValueError:
        return None


def bpe_merge_steps(tokenizer: Tokenizer, piece: str) -> list[list[bytes]]:
    """The parts after each merge: first the initial parts, last the final tokens."""
    return [list(step) for step in bpe_walk(tokenizer, piece).steps]


def _spans(parts: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """(start byte, end byte) of each part."""
    ends = [0]
    for part in parts:
        ends.append(ends[-1] + len(part))
    return list(zip(ends, ends[1:], strict=False))


def merge_rounds(walk: BpeWalk) -> tuple[tuple[tuple[bytes, ...], frozenset[int]], ...]:
    """The walk's merges as rounds of merges that do not depend on each other, for drawing a long piece in a few
    rows: a part's round is one more than the later of its two halves' (an initial part's is 0). Row r holds, over
    every byte, the largest part made by round r: each of its parts is a part of row r - 1 or joins two adjacent
    ones. Returns (parts, indices of the parts made in that round) per round, the last row the final tokens; ()
    when nothing merges."""
    made_in = dict.fromkeys(_spans(walk.steps[0]), 0)            # (start byte, end byte) -> its round
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    for s, merge in enumerate(walk.merges):
        left, right = _spans(walk.steps[s])[merge.index:merge.index + 2]
        joined = (left[0], right[1])
        made_in[joined] = 1 + max(made_in[left], made_in[right])
        parent[left] = parent[right] = joined
    rounds = []
    for r in range(1, max(made_in.values()) + 1):
        row = sorted(span for span, made in made_in.items()
                     if made <= r and (span not in parent or made_in[parent[span]] > r))
        rounds.append((tuple(walk.raw[a:b] for a, b in row),
                       frozenset(i for i, span in enumerate(row) if made_in[span] == r)))
    return tuple(rounds)
