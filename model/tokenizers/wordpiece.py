"""WordPiece (GGUF tokenizer model "bert": BERT, MiniLM, BGE) built with the `tokenizers` library from a GGUF's
vocabulary, as transformers' BertTokenizer encodes.

llama.cpp's converter writes a WordPiece vocabulary with a "phantom space": a word-initial piece `x` is stored as
`▁x`, a continuation `##x` as `x`; control tokens ([CLS], [SEP], [MASK], ...) unchanged. That is undone here, and
the pieces go to `tokenizers`' WordPiece model behind BERT's normalizer (clean text, Chinese characters apart,
lowercase and accents stripped for an uncased vocabulary) and pre-tokenizer (whitespace, punctuation). A GGUF does not
say whether the model is cased: a vocabulary with no upper-case letter in its ordinary pieces is uncased (BERT's
uncased vocabularies have none; cased ones have thousands). Control-token strings written in the text ("[MASK]")
are matched whole first, as transformers' tokenizer does.
"""
from __future__ import annotations

from model.tokenizers.base import TokenType
from model.tokenizers.labels import readable_token
from model.tokenizers.specials import SpecialSplitter

SPACE = "▁"                 # U+2581: llama.cpp's mark of a word-initial piece
CONTINUATION = "##"
MAX_WORD_CHARACTERS = 100   # a longer word is one [UNK] (BertTokenizer's max_input_chars_per_word)


class WordPieceTokenizer:
    """BERT's WordPiece over a GGUF vocabulary: encode gives prefix_ids, the text's pieces, suffix_ids."""

    def __init__(self, tokens: list[bytes], token_types: list[int], *, unknown_token_id: int,
                 bos_token_id: int | None = None, eos_token_id: int | None = None, add_bos: bool = True,
                 add_eos: bool = True):
        """bos ([CLS]) and eos ([SEP]) go around every text when add_bos / add_eos."""
        import tokenizers
        from tokenizers import models, normalizers, pre_tokenizers

        if len(tokens) != len(token_types):
            raise ValueError(f"it has {len(tokens):,} tokens but {len(token_types):,} token types")
        texts = [_text(i, t) for i, t in enumerate(tokens)]
        for kind, token_id in (("unknown", unknown_token_id), ("BOS", bos_token_id), ("EOS", eos_token_id)):
            if token_id is not None and not 0 <= token_id < len(texts):
                raise ValueError(f"its {kind} token id {token_id} is outside the vocabulary (0..{len(texts) - 1})")
        self.vocab_size = len(texts)
        self._control = {i for i, kind in enumerate(token_types) if kind == TokenType.CONTROL}
        self._pieces = [_wordpiece(text, i in self._control) for i, text in enumerate(texts)]   # '##x' / 'x'
        vocab: dict[str, int] = {}
        for i, piece in enumerate(self._pieces):
            if token_types[i] in (TokenType.NORMAL, TokenType.CONTROL, TokenType.UNKNOWN):
                vocab.setdefault(piece, i)
        self.lowercase = not any(char.lower() != char for i, piece in enumerate(self._pieces)
                                 if token_types[i] == TokenType.NORMAL for char in piece)
        unknown = self._pieces[unknown_token_id]
        tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token=unknown, continuing_subword_prefix=CONTINUATION,
                                                    max_input_chars_per_word=MAX_WORD_CHARACTERS))
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                    lowercase=self.lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        specials: dict[str, int] = {}
        for i in sorted(self._control):
            specials.setdefault(texts[i], i)
        tok.add_special_tokens([tokenizers.AddedToken(text, special=True, normalized=False) for text in specials])
        self._tokenizer = tok
        self._specials = SpecialSplitter(specials)
        self.special_ids = frozenset(self._specials.ids.values())
        self.bos_token_id = bos_token_id if add_bos else None
        self.eos_token_id = eos_token_id
        self.unknown_token_id = unknown_token_id
        self.prefix_ids = () if self.bos_token_id is None else (self.bos_token_id,)
        self.suffix_ids = (eos_token_id,) if add_eos and eos_token_id is not None else ()

    @property
    def missing_bytes(self) -> bytes:
        """Byte values no token covers: none is dropped (an unknown word becomes [UNK])."""
        return b""

    def encode(self, text: str) -> list[int]:
        """[CLS] (when the file adds it), the text's WordPiece ids, [SEP] (when the file adds it)."""
        return [*self.prefix_ids, *self._tokenizer.encode(text, add_special_tokens=False).ids, *self.suffix_ids]

    def decode(self, ids: list[int]) -> str:
        """Words joined by spaces, a continuation glued to the piece before it (as BertTokenizer decodes, without
        its clean-up of spaces before punctuation); control tokens as written."""
        return "".join(self.token_bytes(i).decode() for i in ids).removeprefix(" ")

    def token_bytes(self, token_id: int) -> bytes:
        """What the token stands for: a word-initial piece with the space before it, a continuation without,
        a control token as written (with a space, as a word of its own)."""
        piece = self._pieces[token_id]
        if piece.startswith(CONTINUATION) and token_id not in self._control:
            return piece[len(CONTINUATION):].encode()
        return (" " + piece).encode()

    def token_label(self, token_id: int) -> str:
        """BERT's own spelling: 'play', '##ing', '[CLS]'."""
        return readable_token(self._pieces[token_id].encode())

    def token_strings(self, ids: list[int]) -> list[str]:
        return [self.token_label(i) for i in ids]

    def pieces(self, text: str) -> list[str]:
        """The words WordPiece cuts (after BERT's normalizer and pre-tokenizer), control-token strings whole."""
        normalize, split = self._tokenizer.normalizer.normalize_str, self._tokenizer.pre_tokenizer.pre_tokenize_str
        return [p for i, part in enumerate(self._specials.split(text))
                for p in ([part] if i % 2 else [word for word, _ in split(normalize(part))])]

    def special_id(self, piece: str) -> int | None:
        """The id of a control token written as piece, None for ordinary text."""
        return self._specials.ids.get(piece)

    def initial_parts(self, piece: str) -> list[bytes]:
        """A word's characters (WordPiece takes the longest known prefix at each point, without merges)."""
        return [char.encode() for char in piece]

    def rank(self, part: bytes) -> int | None:
        """None: WordPiece has no merge order."""
        return None

    def part_id(self, part: bytes) -> int | None:
        """The id of a word-initial piece spelled part, None when there is none."""
        return self._tokenizer.token_to_id(part.decode("utf-8", errors="replace"))


def _wordpiece(text: str, control: bool) -> str:
    """A GGUF piece back in WordPiece's spelling: '▁x' -> 'x', 'x' -> '##x'; control tokens unchanged."""
    if control:
        return text
    return text[len(SPACE):] if text.startswith(SPACE) else CONTINUATION + text


def _text(token_id: int, token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"token {token_id} ({token!r}) is not UTF-8 text") from None
