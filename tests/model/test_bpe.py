"""The step-by-step BPE walk ends where the real encoding ends, one merge at a time: byte-level BPE (SmolLM2, the
lowest rank first) and SentencePiece (a vocabulary trained by the sentencepiece library, the highest score first)."""
import random

import pytest

from harness.trained_vocabs import sentencepiece_meta, train_sentencepiece
from model.tokenizers.bpe_walk import MAX_PIECE_BYTES, bpe_merge_steps, bpe_walk
from model.tokenizers.from_gguf import build_tokenizer

TEXTS = [
    "The quick brown fox jumps over the lazy dog; it's what they'd call unbelievably antidisestablishmentarian.",
    "Order #4521 shipped on 2024-06-01 at 13:45, total $12,345.67 (3.14159 rad), phone +44 20 7946 0958.",
    "東京は日本の首都です。北京欢迎你！한국어 텍스트도 있습니다.",
    "Emoji 🌍🚀👩‍💻🇯🇵 and symbols ∑∫√≠ → ✓",
    "Zürich café naïve Ångström ÉLAN façade São Paulo Kraków Þingvellir",
    "   leading  spaces\n\n\ttabs\r\n  and\u00a0nbsp, trailing   ",
    "def fibonacci(n: int) -> list[int]:\n    return [a for a in range(n) if a % 2 == 0]  # even\n",
]


def random_texts(n: int = 40, seed: int = 0) -> list[str]:
    """Mixed-script strings from ASCII, Latin-1 supplement, CJK, Cyrillic and emoji code points."""
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0xA0, 0xFF), (0x4E00, 0x4E80), (0x0410, 0x044F), (0x1F300, 0x1F320)]
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(5, 40)):
            lo, hi = rng.choice(ranges)
            chars.append(chr(rng.randint(lo, hi)))
        out.append("".join(chars))
    return out


@pytest.fixture(scope="module")
def tok(lm):
    return lm.tokenizer


def ordinary_ids(tok, text: str) -> list[int]:
    """tokenizer.encode without the BOS prefix some models add."""
    return tok.encode(text)[len(tok.prefix_ids):]


@pytest.mark.parametrize("text", TEXTS + random_texts())
def test_last_step_is_the_real_encoding(tok, text):
    pieces = tok.pieces(text)
    assert "".join(pieces) == text
    walked = []
    for piece in pieces:
        walk = bpe_walk(tok, piece)
        assert list(walk.tokens) == ordinary_ids(tok, piece), piece
        walked.extend(walk.tokens)
    assert walked == ordinary_ids(tok, text)


@pytest.mark.parametrize("text", TEXTS)
def test_each_step_joins_the_lowest_ranked_adjacent_pair(tok, text):
    for piece in tok.pieces(text):
        walk = bpe_walk(tok, piece)
        assert [bytes([b]) for b in walk.raw] == list(walk.steps[0])
        assert len(walk.merges) == len(walk.steps) - 1
        for before, after, merge in zip(walk.steps[:-1], walk.steps[1:], walk.merges, strict=True):
            i = merge.index
            assert len(after) == len(before) - 1
            assert after[:i] == before[:i] and after[i + 1:] == before[i + 2:]
            assert (before[i], before[i + 1]) == (merge.left, merge.right)
            assert after[i] == merge.left + merge.right
            assert tok.token_bytes(merge.rank) == merge.left + merge.right   # rank is the GGUF token id
            assert merge.token_id == merge.rank
            pair_ranks = [tok.rank(a + b) for a, b in zip(before[:-1], before[1:], strict=True)]
            available = [r for r in pair_ranks if r is not None]
            assert merge.rank == min(available)
            assert pair_ranks.index(merge.rank) == i                          # leftmost on a tie
        last = walk.steps[-1]
        assert all(tok.rank(a + b) is None for a, b in zip(last[:-1], last[1:], strict=True))  # nothing left
        for step, ids in zip(walk.steps, walk.ids, strict=True):
            assert [tok.token_bytes(i) for i in ids] == list(step)


def test_a_known_word(tok):
    steps = bpe_merge_steps(tok, " the")
    assert steps[0] == [b" ", b"t", b"h", b"e"]
    assert steps[-1] == [b" the"]
    assert bpe_walk(tok, " the").tokens == (tok.encode(" the")[-1],)


def test_digits_are_single_pieces_and_single_tokens(tok):
    assert tok.pieces("2024") == ["2", "0", "2", "4"]
    walk = bpe_walk(tok, "7")
    assert walk.steps == ((b"7",),) and walk.merges == ()


def test_control_token_is_one_piece_without_merges(tok):
    pieces = tok.pieces("<|im_start|>user\nHi<|im_end|>")
    assert pieces[0] == "<|im_start|>" and pieces[-1] == "<|im_end|>"
    walk = bpe_walk(tok, "<|im_start|>")
    assert walk.special and walk.merges == ()
    assert list(walk.tokens) == ordinary_ids(tok, "<|im_start|>")
    assert len(walk.tokens) == 1 and walk.tokens[0] in tok.special_ids


def test_bytes_without_a_token_are_dropped_as_encode_does(tok):
    piece = "!\x04?"  # one punctuation piece; byte 0x04 has no token in this vocabulary
    assert tok.pieces(piece) == [piece]
    assert b"\x04" in tok.missing_bytes
    walk = bpe_walk(tok, piece)
    assert walk.raw == b"!?"
    assert list(walk.tokens) == ordinary_ids(tok, piece)


def test_too_long_piece_is_refused(tok):
    with pytest.raises(ValueError, match="shorter word"):
        bpe_walk(tok, "a" * (MAX_PIECE_BYTES + 1))


@pytest.fixture(scope="module")
def spm():
    """A SentencePiece model trained here and our tokenizer of its GGUF metadata."""
    sp = train_sentencepiece()
    return sp, build_tokenizer(sentencepiece_meta(sp), "tiny-spm")


def sentencepiece_score(sp, part: bytes) -> float | None:
    """The score of the normal sentencepiece piece spelled part (spaces as '▁'), None when there is none."""
    piece = part.decode("utf-8", errors="replace").replace(" ", "▁")
    i = sp.piece_to_id(piece)
    normal = sp.id_to_piece(i) == piece and not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i))
    return sp.get_score(i) if normal else None


@pytest.mark.parametrize("text", TEXTS + random_texts())
def test_sentencepiece_walk_ends_at_sentencepieces_encoding(spm, text):
    sp, tok = spm
    walked = [i for piece in tok.pieces(text) for i in bpe_walk(tok, piece).tokens]
    assert walked == tok.encode(text)[1:] == sp.encode(text)


@pytest.mark.parametrize("text", TEXTS)
def test_sentencepiece_walk_joins_the_highest_scoring_pair(spm, text):
    sp, tok = spm
    for piece in tok.pieces(text):
        walk = bpe_walk(tok, piece)
        assert b"".join(walk.steps[0]) == piece.encode()
        for part in walk.steps[0]:  # characters; a character without a piece as its byte tokens
            assert sentencepiece_score(sp, part) is not None or len(part) == 1
        for before, after, merge in zip(walk.steps[:-1], walk.steps[1:], walk.merges, strict=True):
            scores = [sentencepiece_score(sp, a + b) for a, b in zip(before[:-1], before[1:], strict=True)]
            best = max(s for s in scores if s is not None)
            assert merge.index == scores.index(best)                          # the leftmost of the best
            assert after[merge.index] == merge.left + merge.right
            assert sp.id_to_piece(merge.token_id) == (merge.left + merge.right).decode().replace(" ", "▁")
        last = walk.steps[-1]
        assert all(sentencepiece_score(sp, a + b) is None for a, b in zip(last[:-1], last[1:], strict=True))
