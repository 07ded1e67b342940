"""The example texts of assets/examples.json (pure: no Streamlit). An example's "zh" holds its Chinese title and
note (the text itself is what the model reads: it stays as it is)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

EXAMPLES_FILE = Path(__file__).resolve().parent.parent / "assets" / "examples.json"
FALLBACK = {"title": "Plain English", "text": "The cat sat on the mat because it was tired.", "note": "", "zh": {}}


@lru_cache(maxsize=1)
def load_examples() -> tuple[dict, ...]:
    """({"title", "text", "note", "zh"}, ...) in file order; one plain sentence when the file cannot be read."""
    try:
        items = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
        return tuple({"title": str(e["title"]), "text": str(e["text"]), "note": str(e.get("note", "")),
                      "zh": {k: str(v) for k, v in dict(e.get("zh", {})).items()}} for e in items) or (FALLBACK,)
    except (OSError, ValueError, KeyError, TypeError):
        return (FALLBACK,)


def default_text() -> str:
    """The text every session starts with (the first example)."""
    return load_examples()[0]["text"]


def localized(example: dict, lang: str) -> dict:
    """The example with its title and note in lang where the file has them (English otherwise)."""
    return {**example, **(example["zh"] if lang == "zh" else {})}


def note_for(text: str, lang: str = "en") -> str:
    """The example's teaching note (in lang where the file has it) when text is one of the examples, else ''."""
    return next((localized(e, lang)["note"] for e in load_examples() if e["text"] == text and e["note"]), "")
