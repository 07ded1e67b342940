"""The example texts of assets/examples.json (pure: no Streamlit). An example's "zh" holds its Chinese title and
note (the text itself is what the model reads: it stays as it is); its "lang" is "zh" for a Chinese text. Which
examples a model is offered: the Chinese ones first when its vocabulary holds Chinese (reads_chinese), else none of
them."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

EXAMPLES_FILE = Path(__file__).resolve().parent.parent / "assets" / "examples.json"
FALLBACK = {"title": "Plain English", "text": "The cat sat on the mat because it was tired.", "note": "", "zh": {},
            "lang": "en"}
# A probe of everyday and technical Chinese (common characters, no punctuation): a vocabulary "holds Chinese" when
# it takes at most CHINESE_TOKENS_PER_CHAR tokens a character here (byte-level English vocabularies take 2-3).
CHINESE_PROBE = ("我们今天在学校学习人工智能的基本知识老师说语言模型先把文字变成数字然后一层一层地计算"
                 "最后预测下一个词这个方法看起来简单但是效果非常好")
CHINESE_TOKENS_PER_CHAR = 1.5


@lru_cache(maxsize=1)
def load_examples() -> tuple[dict, ...]:
    """({"title", "text", "note", "zh"}, ...) in file order; one plain sentence when the file cannot be read."""
    try:
        items = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
        return tuple({"title": str(e["title"]), "text": str(e["text"]), "note": str(e.get("note", "")),
                      "zh": {k: str(v) for k, v in dict(e.get("zh", {})).items()},
                      "lang": str(e.get("lang", "en"))} for e in items) or (FALLBACK,)
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


def reads_chinese(tokenizer) -> bool:
    """Whether a tokenizer (encode, prefix_ids) holds Chinese: at most CHINESE_TOKENS_PER_CHAR tokens a character
    on CHINESE_PROBE."""
    tokens = len(tokenizer.encode(CHINESE_PROBE)) - len(tokenizer.prefix_ids)
    return tokens <= CHINESE_TOKENS_PER_CHAR * len(CHINESE_PROBE)


def offered(chinese: bool) -> list[int]:
    """Indices into load_examples() of the examples to offer, in order: with a Chinese vocabulary the Chinese ones,
    then the others; without one, only the others."""
    examples = load_examples()
    zh = [i for i, e in enumerate(examples) if e["lang"] == "zh"]
    rest = [i for i, e in enumerate(examples) if e["lang"] != "zh"]
    return zh + rest if chinese else rest
