"""The tokenization view's choices (pure: no Streamlit): which pre-tokenizer pieces it draws together, and what
the byte-level figure draws of each piece's BPE walk."""
from __future__ import annotations

from collections.abc import Sequence

from model.tokenizers.bpe_walk import BpeWalk, merge_rounds
from viz.tokenization import PieceRounds

WINDOW_CHARS = 40   # characters drawn at once: a 40-character sentence stays readable at 1024x768


def piece_window(sizes: Sequence[int | None], chosen: int, max_size: int = WINDOW_CHARS) -> range:
    """The consecutive pieces drawn with pieces[chosen]: its neighbours, one to the right then one to the left in
    turn, while their sizes (characters) add up to at most max_size; a piece of size None (it cannot be drawn) ends
    the window on its side. pieces[chosen] alone when it is larger than max_size."""
    if not 0 <= chosen < len(sizes):
        raise ValueError(f"chosen must be a piece's index (0 to {len(sizes) - 1}), got {chosen}")
    lo, hi, total = chosen, chosen + 1, sizes[chosen] or 0
    open_sides = {"right", "left"}
    while open_sides:
        for side in ("right", "left"):
            if side not in open_sides:
                continue
            k = hi if side == "right" else lo - 1
            size = sizes[k] if 0 <= k < len(sizes) else None
            if size is None or total + size > max_size:
                open_sides.discard(side)
                continue
            total += size
            lo, hi = (lo, hi + 1) if side == "right" else (lo - 1, hi)
    return range(lo, hi)


def piece_rounds(tok, walk: BpeWalk) -> PieceRounds:
    """What byte_level_figure draws of one piece's walk: its bytes' ids, and the parts of each round of merges
    (bpe_walk.merge_rounds) with their ids."""
    byte_ids = tuple(tok.part_id(bytes([b])) for b in walk.raw)
    if walk.special:
        return PieceRounds(walk.raw, byte_ids, walk.steps, (frozenset({0}),), walk.ids, special=True)
    ids = {part: token_id for step, step_ids in zip(walk.steps, walk.ids, strict=True)
           for part, token_id in zip(step, step_ids, strict=True)}          # every part of a round is in a step
    rounds = merge_rounds(walk)
    return PieceRounds(walk.raw, byte_ids, tuple(parts for parts, _ in rounds), tuple(made for _, made in rounds),
                       tuple(tuple(ids[part] for part in parts) for parts, _ in rounds))
