"""A slow path of the pinned Streamlit (1.67) mended once per process: router.py calls mend() before any page runs.

Every widget's label and option goes through `string_util.extract_leading_icon` (a leading emoji becomes the
widget's icon), and a label that is not ASCII (the Chinese interface's, a token pill's "␣the") reaches
`extract_leading_emoji`, which calls `re.search(EMOJI_EXTRACTION_REGEX, text)`. re.search looks a compiled pattern up
in re's cache by its hash, and a compiled pattern's hash is computed over its whole program: 23 KB of emoji
alternatives, ~45 µs a label, ~1 ms for a 22-token text's query pills, every run of every session. The pattern's
own `search` gives the same match without that lookup (~7 µs).
"""
from __future__ import annotations

from streamlit import string_util
from streamlit.emojis import EMOJI_EXTRACTION_REGEX

STREAMLITS = string_util.extract_leading_emoji     # Streamlit's own, kept for the tests that compare the two


def extract_leading_emoji(text: str) -> tuple[str, str]:
    """Streamlit's extract_leading_emoji: (the leading emoji or "", the rest without the separator)."""
    if not text or text.isascii():
        return "", text
    found = EMOJI_EXTRACTION_REGEX.search(text)
    return ("", text) if found is None else (found.group(1), found.group(2))


def mend() -> None:
    string_util.extract_leading_emoji = extract_leading_emoji
