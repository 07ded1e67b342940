"""SentencePiece unigram (GGUF tokenizer model "t5": T5, Flan-T5, mT5) built with the `tokenizers` library from a
GGUF's pieces and scores, as the sentencepiece library encodes.

The text goes through the file's precompiled_charsmap (SentencePiece's own normalization table, e.g. nmt_nfkc: it
folds '，' to ',' and tabs and newlines to spaces), then, with remove_extra_whitespaces, loses its leading and
trailing spaces and keeps one space of each run; with add_space_prefix a '▁' goes first, and every space becomes '▁'.
The unigram model then picks the segmentation of highest total score (Viterbi over the whole text, as sentencepiece
does; a run of characters no piece covers is one unknown token). Only the file's normal pieces (and its unknown
token) take part: the vocabulary's padding rows ("[PAD7]", unused), control tokens (</s>, <pad>) and user-defined
ones are never produced by segmentation. Control and user-defined strings written in the text ("<extra_id_0>",
"</s>") are matched whole first, as transformers' tokenizer and llama.cpp do. encode appends </s> when the file asks
for it (add_eos_token: T5's tokenizer does).
"""
from __future__ import annotations

import math

import numpy as np

from model.tokenizers.base import TokenType
from model.tokenizers.labels import readable_token
from model.tokenizers.specials import SpecialSplitter

SPACE = "▁"   # U+2581, SentencePiece's mark for a space
SEGMENTED = (TokenType.NORMAL, TokenType.UNKNOWN)           # pieces the unigram model chooses from
WHOLE = (TokenType.CONTROL, TokenType.USER_DEFINED)         # matched whole where written in the text


class UnigramTokenizer:
    """SentencePiece unigram over a GGUF vocabulary (model "t5")."""

    def __init__(self, tokens: list[bytes], scores: list[float], token_types: list[int], *, unknown_token_id: int,
                 bos_token_id: int | None = None, eos_token_id: int | None = None, add_bos: bool = False,
                 add_eos: bool = True, add_space_prefix: bool = True, remove_extra_whitespaces: bool = True,
                 precompiled_charsmap: bytes | None = None):
        import tokenizers
        from tokenizers import Regex, models, normalizers

        if not len(tokens) == len(scores) == len(token_types):
            raise ValueError(f"it has {len(tokens):,} tokens but {len(scores):,} scores and {len(token_types):,} "
                             f"token types")
        texts = [_text(i, t) for i, t in enumerate(tokens)]
        for kind, token_id in (("unknown", unknown_token_id), ("BOS", bos_token_id), ("EOS", eos_token_id)):
            if token_id is not None and not 0 <= token_id < len(texts):
                raise ValueError(f"its {kind} token id {token_id} is outside the vocabulary (0..{len(texts) - 1})")
        if token_types[unknown_token_id] != TokenType.UNKNOWN:
            raise ValueError(f"its unknown token id {unknown_token_id} ({texts[unknown_token_id]!r}) is not of the "
                             f"unknown type")
        if any(kind == TokenType.BYTE for kind in token_types):
            raise ValueError("its unigram vocabulary has byte-fallback tokens (<0xNN>); this app reads unigram "
                             "vocabularies without them (T5, Flan-T5, mT5)")
        segmented = [i for i, kind in enumerate(token_types) if kind in SEGMENTED]
        for i in segmented:
            if not math.isfinite(scores[i]):
                raise ValueError(f"token {i} ({texts[i]!r}) has no valid score ({scores[i]})")
        surfaces = [texts[i] if i != unknown_token_id else " " + texts[i] for i in segmented]   # a space: no text
        model = models.Unigram([(surface, float(scores[i])) for surface, i in zip(surfaces, segmented, strict=True)],
                               unk_id=segmented.index(unknown_token_id), byte_fallback=False)
        tok = tokenizers.Tokenizer(model)
        steps = [normalizers.Precompiled(bytes(precompiled_charsmap))] if precompiled_charsmap else []
        if remove_extra_whitespaces:
            steps += [normalizers.Replace(Regex(" {2,}"), " "), normalizers.Replace(Regex(r"\A | \z"), "")]
        if add_space_prefix:
            steps.append(normalizers.Prepend(SPACE))
        tok.normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", SPACE)])
        whole: dict[str, int] = {}
        for i, kind in enumerate(token_types):
            if kind in WHOLE and texts[i]:
                whole.setdefault(texts[i], i)
        tok.add_special_tokens([tokenizers.AddedToken(text, special=True, normalized=False) for text in whole])
        ids = np.array(segmented + [0] * len(whole), dtype=np.int64)               # the library's id -> the file's
        for text, i in whole.items():
            ids[tok.token_to_id(text)] = i
        self._tokenizer, self._ids = tok, ids
        self._specials = SpecialSplitter(whole)
        self.special_ids = frozenset(whole.values())
        self.vocab_size = len(texts)
        self.unknown_token_id = unknown_token_id
        self.bos_token_id = bos_token_id if add_bos else None
        self.eos_token_id = eos_token_id
        self.prefix_ids = () if self.bos_token_id is None else (self.bos_token_id,)
        self.suffix_ids = (eos_token_id,) if add_eos and eos_token_id is not None else ()
        self.add_space_prefix = add_space_prefix
        self._texts, self._types = texts, list(token_types)
        self._by_piece = {texts[i]: i for i in reversed(segmented)}

    @property
    def missing_bytes(self) -> bytes:
        """Byte values no token covers: none is dropped (unknown characters become the unknown token)."""
        return b""

    def encode(self, text: str) -> list[int]:
        """The text's piece ids (sentencepiece's segmentation), then </s> when the file adds it."""
        found = self._tokenizer.encode(text, add_special_tokens=False).ids
        return [*self.prefix_ids, *self._ids[found].tolist(), *self.suffix_ids]

    def decode(self, ids: list[int]) -> str:
        """The pieces' text, '▁' as a space, the space add_space_prefix put first dropped; control tokens as
        written."""
        text = "".join(self.token_bytes(i).decode() for i in ids)
        return text.removeprefix(" ") if self.add_space_prefix else text

    def token_bytes(self, token_id: int) -> bytes:
        """What the token stands for: a normal piece with '▁' as a space, others as written."""
        text = self._texts[token_id]
        return (text.replace(SPACE, " ") if self._types[token_id] == TokenType.NORMAL else text).encode()

    def token_label(self, token_id: int) -> str:
        return readable_token(self.token_bytes(token_id))

    def token_strings(self, ids: list[int]) -> list[str]:
        return [self.token_label(i) for i in ids]

    def pieces(self, text: str) -> list[str]:
        """The runs the unigram model segments (normalized, spaces as spaces), special-token strings whole."""
        normalize = self._tokenizer.normalizer.normalize_str
        return [p for i, part in enumerate(self._specials.split(text))
                for p in ([part] if i % 2 else [normalize(part).replace(SPACE, " ")] if part else [])]

    def special_id(self, piece: str) -> int | None:
        """The id of a control / user-defined token written as piece, None for ordinary text."""
        return self._specials.ids.get(piece)

    def initial_parts(self, piece: str) -> list[bytes]:
        """A run's characters (the unigram model chooses among whole segmentations, without merges)."""
        return [char.encode() for char in piece]

    def rank(self, part: bytes) -> int | None:
        """None: a unigram model has no merge order."""
        return None

    def part_id(self, part: bytes) -> int | None:
        """The id of the normal piece spelled part (spaces as '▁'), None when there is none."""
        return self._by_piece.get(part.decode("utf-8", errors="replace").replace(" ", SPACE))


def _text(token_id: int, token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"token {token_id} ({token!r}) is not UTF-8 text") from None
