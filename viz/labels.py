"""Token labels for every figure: one place that escapes, prefixes positions, shortens and thins them.

Plotly reads a little HTML in titles, ticks and hovers (<b>, <br>, <a>), so every token text goes through
plotly_escape. Plotly also guesses an axis type from its values: labels such as "8 2" or "6 ," look like numbers
to it (it strips spaces and commas). Token axes are therefore always declared: categorical (token_axis) or integer
positions with tick text (position_axis), never guessed.
"""
from __future__ import annotations

import math

from viz.text import N_

MAX_TICK_CHARS = 10     # a token tick label is cut to this many characters
# What the readable token symbols mean (model.tokenizers.labels.readable_token makes them); shown wherever tokens are.
SYMBOLS = (("␣", N_("␣ = a space")), ("↵", N_("↵ = a newline")), ("⇥", N_("⇥ = a tab")),
           ("⏎", N_("⏎ = a carriage return")),
           ("⁄", N_("我¹⁄₂ = the first of two tokens that spell the character 我 (the hover shows its bytes)")),
           ("<0x", N_("<0xE6> = one byte of a character split over several tokens")),
           ("<U+", N_("<U+200B> = an invisible character")))


def symbol_legend(tokens: list[str], translate=str) -> str:
    """What the symbols in these token labels mean ('␣ = a space · ↵ = a newline'), '' when there are none;
    translate: each meaning in the reader's language."""
    return " · ".join(translate(meaning) for symbol, meaning in SYMBOLS if any(symbol in t for t in tokens))


def plotly_escape(text: str) -> str:
    """Text that plotly shows literally (a token like '<br>' or '<0xF0>' is not read as markup)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shorten(text: str, max_chars: int = MAX_TICK_CHARS) -> str:
    """Cut to max_chars characters with an ellipsis (raw text: escape afterwards)."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def position_labels(tokens: list[str]) -> list[str]:
    """Unique raw labels '0 The', '1 ␣cat', ... (token strings repeat; the position makes each one unique); a token
    labelled as part of a character keeps its bytes beside it ('3 我¹⁄₂ <0xE6><0x88>': its `raw`)."""
    return [f"{i} {t}" + (f" {t.raw}" if getattr(t, "raw", None) else "") for i, t in enumerate(tokens)]


def token_categories(tokens: list[str]) -> list[str]:
    """position_labels made safe for plotly: the category names of a token axis, and what hovers show."""
    return [plotly_escape(label) for label in position_labels(tokens)]


def tick_positions(n: int, max_labels: int) -> list[int]:
    """Every k-th position from 0, so that at most max_labels of n remain."""
    step = max(1, math.ceil(n / max(1, max_labels)))
    return list(range(0, n, step))


def tick_texts(tokens: list[str], positions: list[int], max_chars: int = MAX_TICK_CHARS) -> list[str]:
    """Escaped tick texts: the token alone when every token is shown, 'position:token' on a thinned axis."""
    thinned = len(positions) < len(tokens)
    if thinned:
        return [plotly_escape(f"{i}:{shorten(tokens[i], max(3, max_chars - 2))}") for i in positions]
    return [plotly_escape(shorten(tokens[i], max_chars)) for i in positions]


def token_axis(tokens: list[str], max_labels: int = 40, max_chars: int = MAX_TICK_CHARS) -> dict:
    """Axis settings for a categorical token axis whose values are token_categories(tokens)."""
    cats = token_categories(tokens)
    positions = tick_positions(len(tokens), max_labels)
    return dict(type="category", categoryorder="array", categoryarray=cats, tickmode="array",
                tickvals=[cats[i] for i in positions], ticktext=tick_texts(tokens, positions, max_chars))


def position_axis(tokens: list[str], max_labels: int = 40, max_chars: int = MAX_TICK_CHARS) -> dict:
    """Axis settings for a token axis whose values are the integer positions 0..n-1."""
    positions = tick_positions(len(tokens), max_labels)
    return dict(type="linear", tickmode="array", tickvals=positions, ticktext=tick_texts(tokens, positions, max_chars),
                range=[-0.5, len(tokens) - 0.5])


def row_axis(labels: list[str], max_chars: int = 18) -> dict:
    """Axis settings for rows of a bar chart (row k at position k, first row on top), labels escaped and cut."""
    return dict(type="linear", tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[plotly_escape(shorten(s, max_chars)) for s in labels],
                range=[len(labels) - 0.5, -0.5])
