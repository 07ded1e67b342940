"""Minimal pairs for activation patching: a clean and a corrupt text of the same token count (for SmolLM2) and the
two candidate next tokens whose logit difference the patching restores. Titles are marked for translation."""
from __future__ import annotations

from dataclasses import dataclass

from viz.text import N_


@dataclass(frozen=True)
class Pair:
    title: str       # English, marked with N_ (shown translated)
    clean: str
    corrupt: str
    answer: str      # one token: the clean text's continuation
    foil: str        # one token: the corrupt text's


PAIRS = (
    Pair(N_("Who gets the drink (indirect object)"), "When Mary and John went to the store, John gave a drink to",
         "When Mary and John went to the store, Mary gave a drink to", " Mary", " John"),
    Pair(N_("The trophy and the suitcase (Winograd)"),
         "The trophy didn't fit in the suitcase because it was too big. The one that was too big was the",
         "The trophy didn't fit in the suitcase because it was too small. The one that was too small was the",
         " trophy", " suit"),
    Pair(N_("Good or bad weather (Chinese)"), "今天天气很好，我很", "今天天气很差，我很", "可", "不"),
)
