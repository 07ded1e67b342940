"""The tokenization view's pure parts: the merge rounds (worked by hand on a hand-made vocabulary), the window of
pieces, what the byte-level figure draws (columns, stacked bytes, rounds, ids, labels only where they fit), the
SentencePiece ladder, and which example texts a Chinese vocabulary is offered (tests/model/test_reads_chinese.py:
which vocabulary reads Chinese)."""
import pytest

from app_core.examples import load_examples, offered
from app_core.tokenization import piece_rounds, piece_window
from model.tokenizers.bpe_walk import bpe_walk, merge_rounds
from model.tokenizers.from_gguf import build_tokenizer
from model.tokenizers.labels import readable_token
from viz import tokenization as vt
from viz.theme import ACCENT


@pytest.fixture(scope="module")
def tok():
    """Letters a, b, c, x, y and merges a+b, ab+c, x+y (ids = ranks + 6), qwen2's split."""
    tokens = [b"<|endoftext|>", b"a", b"b", b"c", b"x", b"y", b"ab", b"abc", b"xy"]
    return build_tokenizer({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
                            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [3] + [1] * 8,
                            "tokenizer.ggml.merges": [b"a b", b"ab c", b"x y"], "tokenizer.ggml.bos_token_id": 0},
                           "hand-made")


# ------------------------------------------------------------------------------------------------ merge rounds
def test_a_merge_that_needs_no_earlier_merge_comes_in_the_first_round(tok):
    walk = bpe_walk(tok, "abcxy")
    assert walk.steps[1:] == ((b"ab", b"c", b"x", b"y"), (b"abc", b"x", b"y"), (b"abc", b"xy"))   # rank order
    # by hand: ab and xy join bytes (round 1), abc joins ab (round 1) and c (round 2)
    assert merge_rounds(walk) == (((b"ab", b"c", b"xy"), frozenset({0, 2})), ((b"abc", b"xy"), frozenset({0})))
    rounds = piece_rounds(tok, walk)
    assert rounds.byte_ids == (1, 2, 3, 4, 5) and rounds.round_ids == ((6, 3, 8), (7, 8)) and rounds.ids == (7, 8)


def test_nothing_to_merge_means_no_round(tok):
    walk = bpe_walk(tok, "ca")
    assert merge_rounds(walk) == () and piece_rounds(tok, walk).ids == (3, 1)


# ------------------------------------------------------------------------------------------------ the window
@pytest.mark.parametrize(("sizes", "chosen", "limit", "expected"), [
    ([3, 5, 2, 10, 4], 2, 12, range(2, 4)),          # right (10) fits, then left (5) and right (4) do not
    ([3, 5, 2, 10, 4], 2, 20, range(0, 4)),          # 2 + 10 + 5 + 3 = 20: the 4 on the right would make 24
    ([3, 5, 2, 10, 4], 3, 5, range(3, 4)),           # larger than the limit: alone
    ([3, None, 2, 1], 2, 40, range(2, 4)),           # a piece that cannot be drawn ends the window
    ([1] * 100, 50, 40, range(31, 71)),              # one to the right, one to the left, in turn
])
def test_the_window_grows_both_ways_within_the_limit(sizes, chosen, limit, expected):
    assert piece_window(sizes, chosen, limit) == expected


def test_the_window_refuses_a_piece_that_is_not_there():
    with pytest.raises(ValueError):
        piece_window([1, 2], 2)


# ------------------------------------------------------------------------------------------------ the figure
def test_the_figure_has_a_column_per_character_and_its_bytes_stacked_under_it(tok):
    text = "ab注"                                                        # 注 = E6 B3 A8
    parts = (b"ab", "注".encode())
    p = vt.PieceRounds(text.encode(), (1, 2, 100, 101, 102), rounds=(parts,), made=(frozenset({0, 1}),),
                       round_ids=((6, 300),))
    fig = vt.byte_level_figure([p], readable_token, max_width=600)
    traces = {t.name: t for t in fig.data}
    assert list(traces) == ["characters", "bytes", "rounds", "ids", "labels"]          # labels: one per font size

    def cells(kind):
        return list(zip(traces[kind].base, traces[kind].x, strict=True))

    assert cells("characters") == [(0, 1), (1, 1), (2, 1)]                       # one column per character
    assert cells("bytes") == [(0, 1), (1, 1), (2, 1), (2, 1), (2, 1)]
    y = list(traces["bytes"].y)
    assert y[2] < y[3] < y[4]                                                   # 注's three bytes stacked
    assert cells("rounds") == [(0, 2), (2, 1)]                                  # "ab" spans two columns
    assert all(c == ACCENT for c in traces["rounds"].marker.color)
    assert [list(c) for c in traces["ids"].customdata] == [["ab", "6", "61 62"], ["注", "300", "E6 B3 A8"]]
    shown = [text for t in fig.data if t.name == "labels" for text in t.text]
    assert {"a", "b", "注", "E6", "B3", "A8", "ab", "6", "300"} <= set(shown)
    assert list(fig.layout.yaxis.ticktext) == ["characters", "UTF-8 bytes", "merge round 1", "token ids"]
    assert fig.layout.width <= 600


def test_a_label_that_does_not_fit_is_left_out_and_the_figure_keeps_its_width():
    text = "注意力" * 33                                                   # 99 characters in 600 px: ~4.7 px each
    p = vt.PieceRounds(text.encode(), tuple(range(297)))
    fig = vt.byte_level_figure([p], readable_token, max_width=600)
    shown = [text for t in fig.data if t.name == "labels" for text in t.text]
    assert "注" not in shown and "E6" not in shown
    assert fig.layout.width <= 600


def test_ids_too_narrow_to_write_are_named_in_the_row_and_kept_in_the_hover():
    """20 Chinese characters in 600 px: ~24 px a character, a one-byte token ~8 px, narrower than an id turned
    upright (10 px font, 12 px): the row says the ids are in the hover, and every id is there."""
    text = "我们在课堂上学习注意力机制我们在课堂上学"
    raw = text.encode()
    parts = tuple(raw[i:i + 2] if i % 3 == 0 else raw[i:i + 1] for i in range(len(raw)) if i % 3 != 1)
    ids = tuple(1000 + i for i in range(len(parts)))                # 2 tokens a character: E6 88 | 91
    p = vt.PieceRounds(raw, tuple(range(len(raw))), rounds=(parts,), made=(frozenset(range(0, len(parts), 2)),),
                       round_ids=(ids,))
    fig = vt.byte_level_figure([p], readable_token, max_width=600)
    assert list(fig.layout.yaxis.ticktext)[-1] == "token ids (hover)"
    hover_ids = [c[1] for t in fig.data if t.name == "ids" for c in t.customdata]
    assert hover_ids == [f"{i:,}" for i in ids]
    written = {a.text for a in fig.layout.annotations} | {x for t in fig.data if t.name == "labels" for x in t.text}
    assert not {f"{i:,}" for i in ids} <= written
    wide = vt.byte_level_figure([p], readable_token, max_width=2000)   # room for every id: the plain name
    assert list(wide.layout.yaxis.ticktext)[-1] == "token ids"


def test_a_partial_character_is_labelled_in_hex_and_bad_input_is_refused():
    assert vt.short_label(readable_token(b"\xe6\xb3")) == "E6B3"
    assert vt.utf8_characters("a注".encode() + b"\xff") == [b"a", "注".encode(), b"\xff"]
    with pytest.raises(ValueError):
        vt.byte_level_figure([vt.PieceRounds(b"ab", (1,))], readable_token)            # one id for two bytes
    with pytest.raises(ValueError):
        vt.byte_level_figure([vt.PieceRounds(b"ab", (1, 2), rounds=((b"a",),), made=(frozenset(),),
                                             round_ids=((1,),))], readable_token)       # parts miss a byte


# ------------------------------------------------------------------------------------------ SentencePiece ladder
def test_bpe_ladder_places_each_part_on_its_bytes():
    steps = [(b"<", b"b", b">"), (b"<b", b">"), (b"<b>",)]
    labels = [["<", "b", ">"], ["<b", ">"], ["<b>"]]
    ids = [(30, 80, 32), (400, 32), (900,)]
    fig = vt.bpe_merge_figure(steps, labels, ids, [None, 0, 0], title="t")
    bars = fig.data[0]
    assert list(bars.y) == [0, 0, 0, 1, 1, 2]
    assert list(bars.base) == [0, 1, 2, 0, 2, 0] and list(bars.x) == [1, 1, 1, 2, 1, 3]
    assert list(bars.text) == ["&lt;", "b", "&gt;", "&lt;b", "&gt;", "&lt;b&gt;"]       # token text escaped
    colors = list(bars.marker.color)
    assert colors[3] == ACCENT and colors[5] == ACCENT and ACCENT not in colors[:3] + [colors[4]]
    assert list(bars.customdata[5]) == ["&lt;b&gt;", 900, "3C 62 3E"]                  # hover: token, id, bytes
    assert list(fig.layout.xaxis.ticktext) == ["3C", "62", "3E"] and fig.layout.xaxis.tickmode == "array"
    assert list(fig.layout.yaxis.ticktext) == ["bytes", "rank 400", "rank 900"]          # merges by rank
    assert fig.layout.yaxis.type == "linear" and fig.layout.yaxis.tickmode == "array"


def test_bpe_ladder_control_token_and_bad_input():
    fig = vt.bpe_merge_figure([(b"<|im_start|>",)], [["<|im_start|>"]], [(1,)], [None], special=True)
    assert list(fig.data[0].x) == [12] and list(fig.layout.yaxis.ticktext) == ["control token"]
    assert fig.data[0].marker.color[0] == vt.SPECIAL_COLOR
    with pytest.raises(ValueError):
        vt.bpe_merge_figure([(b"a",)], [["a"], ["b"]], [(1,)], [None])


# ------------------------------------------------------------------------------------------------ examples
def test_chinese_examples_come_first_for_a_chinese_vocabulary_and_not_at_all_otherwise():
    examples = load_examples()
    chinese = [i for i, e in enumerate(examples) if any("\u4e00" <= c <= "\u9fff" for c in e["text"])]
    assert len(chinese) >= 5 and all(examples[i]["lang"] == "zh" for i in chinese)
    assert offered(True)[:len(chinese)] == chinese and sorted(offered(True)) == list(range(len(examples)))
    assert not set(offered(False)) & set(chinese) and len(offered(False)) == len(examples) - len(chinese)
