"""Strings for tokenizer tests: prose in several scripts, Chinese, code, numbers, whitespace runs, emoji, control
characters, random Unicode over all planes, and chat text with control tokens."""
import random

WORDS = ["the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "attention", "is", "all", "you",
         "need", "transformer", "héllo", "naïve", "Zürich", "東京", "日本語", "한국어", "Ёжик", "مرحبا", "שלום",
         "🙂", "🚀🌍", "👩‍💻", "e\u0301", "a\u200bb", "\u202eRTL\u202c", "don't", "I'm", "we'll", "they've",
         "it's", "O'Neil", "x86_64", "foo_bar", "<|im_start|>", "<|endoftext|>", "\x04", "\x13\x14", "\x1d",
         "\U00040001", "\U000b0000", "\U00010348", "\ufeff", "\u00a0", "\u3000", "\x00", "\x7f", "<b>", "</b>",
         "Count: 1, 2, 3", "IT'S", "we'LL", "x'ſ"]
CHINESE = ["注意力机制让每个词元关注之前的词元。", "多头注意力把查询、键和值分成几个头。",
           "北京欢迎你！", "今天天气很好，", "我们去公园散步", "旋转位置编码", "分词器把文本切成词元",
           "模型预测下一个词元", "中文的注意力", "（括号）", "《书名》", "“引号”", "第1章", "2024年6月1日",
           "龘", "𠀀𠀁"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < 10; ++i) {\n\tsum += a[i];\n}",
        "SELECT * FROM t WHERE id = 42;", "<div class=\"a\">&nbsp;</div>", "λx. x + 1", "x = [1, 2, 3]  # list",
        "if __name__ == '__main__':\n    main()", "    \n\n\t  \r\n", "{\"key\": [1.5e-3, null, true]}",
        "<b>bold</b>", "a/b//c", "//comment\r\n", "i++;--j"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "\u00a0", "\u2003", "\r", "\x0b", "\x0c", "\x85"]


def random_string(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:  # prose
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25))) + rng.choice([".", "!", "?", ""])
    if kind == 1:  # code
        return "".join(rng.choice(CODE) for _ in range(rng.randrange(1, 4)))
    if kind == 2:  # numbers, whitespace runs before digits
        parts = [rng.choice(SPACES) * rng.randrange(1, 4) + str(rng.randrange(10 ** rng.randrange(1, 12)))
                 for _ in range(rng.randrange(1, 8))]
        return rng.choice(["", "x", "v", "$", "-"]) + "".join(parts) + rng.choice(["", "%", " km", ".5", ",000"])
    if kind == 3:  # CJK and emoji
        return "".join(chr(rng.choice([rng.randrange(0x4E00, 0x9FFF), rng.randrange(0x1F300, 0x1FAFF),
                                       rng.randrange(0x3040, 0x30FF), rng.randrange(0xAC00, 0xD7A3)]))
                       for _ in range(rng.randrange(1, 20)))
    if kind == 4:  # random unicode over all planes, surrogates excluded
        chars = []
        for _ in range(rng.randrange(1, 30)):
            cp = rng.choice([rng.randrange(0, 0x80), rng.randrange(0x80, 0x800), rng.randrange(0x800, 0xD800),
                             rng.randrange(0xE000, 0x10000), rng.randrange(0x10000, 0x110000)])
            chars.append(chr(cp))
        return "".join(chars)
    if kind == 5:  # ASCII soup with punctuation runs and control characters
        soup = "abcXYZ019 .,;:!?'\"()[]{}-_=+*/\\\n\t#@$%^&|~`<>\x01\x1b"
        return "".join(rng.choice(soup) for _ in range(rng.randrange(1, 60)))
    if kind == 6:  # Chinese sentences mixed with Latin words, numbers and spaces
        return "".join(rng.choice(CHINESE + WORDS[:12] + SPACES[:5] + ["1", "23", "456"])
                       for _ in range(rng.randrange(1, 10)))
    return "".join(rng.choice(WORDS + SPACES + CODE) for _ in range(rng.randrange(1, 12)))


def generated_strings(n: int = 2400, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    return [random_string(rng) for _ in range(n)]


CONTROL_WORDS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>", "<jupyter_code>", "<|im_", "im_end|>",
                 "<|", "|>", "<<|im_end|>>", "<|im_start|><|im_end|>", "<|endoftext|", "<filename", "<|IM_END|>"]


def chat_string(rng: random.Random) -> str:
    """Control tokens mixed with text: adjacent, at the start or end, inside words, partial ones that stay text."""
    parts = []
    for _ in range(rng.randrange(1, 10)):
        kind = rng.randrange(4)
        if kind == 0:
            parts.append(rng.choice(CONTROL_WORDS))
        elif kind == 1:
            parts.append(rng.choice(WORDS) + rng.choice(CONTROL_WORDS) + rng.choice(WORDS))  # inside a word
        elif kind == 2:
            parts.append(rng.choice(["user", "assistant", "system"]) + rng.choice(["\n", " ", "", "\n\n"]))
        else:
            parts.append(random_string(rng))
    return "".join(parts)
