"""SentencePiece BPE (GGUF tokenizer model "llama": Llama 2, TinyLlama, Mistral) over a GGUF's tokens, scores and
token types, as llama.cpp's llm_tokenizer_spm encodes.

Control, user-defined and unknown-token strings written in the text are found first and kept whole. Each run of
text between them gets a leading space (add_space_prefix), spaces become '▁', and the run starts as single
characters; again and again the adjacent pair whose joined text is the normal token with the highest score is
joined (the leftmost on a tie). A character with no token of its own becomes its UTF-8 bytes, as byte tokens
<0xNN> (byte fallback). Only normal tokens are made by joining (as the sentencepiece library does; llama.cpp would
also join into an unused or control token spelled by normal ones, which no real vocabulary has).
"""
from __future__ import annotations

import heapq
import math

import regex

from model.tokenizers.base import TokenType
from model.tokenizers.labels import readable_token, sequence_labels
from model.tokenizers.specials import SpecialSplitter

SPACE = "▁"  # U+2581, SentencePiece's mark for a space
SPECIAL_TOKEN_TYPES = (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)  # matched whole (llama.cpp)
_BYTE_TOKEN = regex.compile(r"<0x([0-9A-Fa-f]{2})>")
KNOWN_SEGMENTS = 1 << 16   # segments whose ids are remembered (~100 bytes each: a few MB at most)


class SentencePieceTokenizer:
    """SentencePiece BPE with byte fallback. rank() is the score order: 0 for the highest score, equal scores share
    a rank (the leftmost pair joins first)."""

    def __init__(self, tokens: list[bytes], scores: list[float], token_types: list[int], *,
                 bos_token_id: int | None = None, eos_token_id: int | None = None, add_space_prefix: bool = True):
        """bos_token_id: prepended by encode (None: nothing is); add_space_prefix: a space before each text run."""
        texts = [_text(i, token) for i, token in enumerate(tokens)]
        if not len(texts) == len(scores) == len(token_types):
            raise ValueError(f"it has {len(texts)} tokens but {len(scores)} scores and {len(token_types)} token types")
        normal: dict[bytes, int] = {}
        specials: dict[str, int] = {}
        byte_ids: dict[int, int] = {}
        for token_id, (text, score, kind) in enumerate(zip(texts, scores, token_types, strict=True)):
            if math.isnan(score):
                raise ValueError(f"token {token_id} ({text!r}) has no valid score (NaN)")
            if kind == TokenType.NORMAL:
                normal.setdefault(text.encode(), token_id)
            elif kind in SPECIAL_TOKEN_TYPES:
                specials.setdefault(text, token_id)
            elif kind == TokenType.BYTE:
                match = _BYTE_TOKEN.fullmatch(text)
                if match is None:
                    raise ValueError(f"token {token_id} ({text!r}) is marked as a byte token but is not <0xNN>")
                byte_ids.setdefault(int(match.group(1), 16), token_id)
        missing = [b for b in range(256) if b not in byte_ids]
        if missing:
            raise ValueError(f"its SentencePiece vocabulary lacks {len(missing)} byte tokens (first: "
                             f"<0x{missing[0]:02X}>), so text outside the vocabulary cannot be tokenized; this app "
                             f"supports byte-fallback vocabularies (Llama 2, TinyLlama, Mistral)")
        _check_characters(normal)
        for kind, token_id in (("BOS", bos_token_id), ("EOS", eos_token_id)):
            if token_id is not None and not 0 <= token_id < len(texts):
                raise ValueError(f"its {kind} token id {token_id} is outside the vocabulary (0..{len(texts) - 1})")
        self.vocab_size = len(texts)
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.prefix_ids = () if bos_token_id is None else (bos_token_id,)
        self.add_space_prefix = add_space_prefix
        self._specials = SpecialSplitter(specials)
        self.special_ids = frozenset(self._specials.ids.values())
        self._normal = normal
        self._byte_ids = byte_ids
        order = {score: rank for rank, score in enumerate(sorted({scores[i] for i in normal.values()}, reverse=True))}
        self._ranks = {text: order[scores[i]] for text, i in normal.items()}
        self._pairs = {pair for text in normal for pair in _adjacent(text.decode())}  # side by side in a token
        self._id_bytes = [_token_bytes(text, kind) for text, kind in zip(texts, token_types, strict=True)]
        self._known: dict[str, tuple[int, ...]] = {}    # segment -> its ids (see _segment_ids)

    @property
    def missing_bytes(self) -> bytes:
        """Byte values no token covers: none (every byte has its <0xNN> token)."""
        return b""

    def encode(self, text: str) -> list[int]:
        """Token ids of text, after the BOS id when the model file asks for one; special-token strings (<s>, </s>,
        <unk>, user-defined ones) become their single id."""
        ids = list(self.prefix_ids)
        for i, part in enumerate(self._specials.split(text)):
            if i % 2:
                ids.append(self._specials.ids[part])
            else:
                for segment in self._segments(part):
                    ids.extend(self._segment_ids(segment))
        return ids

    def _segment_ids(self, segment: str) -> tuple[int, ...]:
        """The ids of one segment, remembered: text repeats its words, and a segment's ids depend on it alone."""
        found = self._known.get(segment)
        if found is None:
            found = tuple(self._id(p) for p in _merge(self._symbols(segment), self._ranks))
            if len(self._known) >= KNOWN_SEGMENTS:
                self._known.clear()                 # bounded: a long run of new text starts the memory over
            self._known[segment] = found
        return found

    def decode(self, ids: list[int]) -> str:
        """The text of ids: '▁' as a space, byte tokens as their bytes, control tokens as written; the space
        add_space_prefix put before the first token is dropped (as llama.cpp and sentencepiece decode)."""
        raw = b"".join(self._id_bytes[i] for i in ids)
        if self.add_space_prefix and ids and self._id_bytes[ids[0]].startswith(b" "):
            raw = raw[1:]
        return raw.decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        """What the token stands for: '▁' as a space, a byte token as its byte, other tokens as written."""
        return self._id_bytes[token_id]

    def token_strings(self, ids: list[int]) -> list[str]:
        """Readable labels: '␣' for '▁', a byte token that is a whole character as that character ('↵' for <0x0A>),
        a character split over byte tokens as its parts ('龘¹⁄₃'), other byte tokens as <0xNN>; control tokens as
        written ("<s>"). ids are read as one text."""
        return sequence_labels([self._id_bytes[i] for i in ids])

    def token_label(self, token_id: int) -> str:
        """One token's readable label on its own (a candidate, not part of a text)."""
        return readable_token(self._id_bytes[token_id])

    def pieces(self, text: str) -> list[str]:
        """text cut where no token spans the cut (so joining never crosses it), spaces as spaces: special-token
        strings whole; each run between them with the space add_space_prefix puts before it."""
        return [p for i, part in enumerate(self._specials.split(text))
                for p in ([part] if i % 2 else [s.replace(SPACE, " ") for s in self._segments(part)])]

    def special_id(self, piece: str) -> int | None:
        """The id of a control / user-defined / unknown token written as piece, None for ordinary text."""
        return self._specials.ids.get(piece)

    def initial_parts(self, piece: str) -> list[bytes]:
        """The piece's characters (a character with no token as its bytes), spelled as token_bytes spells them."""
        return [_shown(p) for p in self._symbols(piece.replace(" ", SPACE))]

    def rank(self, part: bytes) -> int | None:
        """Score order of the normal token spelled part (0 = the highest score), None if there is none."""
        return self._ranks.get(_escaped(part))

    def part_id(self, part: bytes) -> int | None:
        """The token id of a part: its normal token, or the byte token of a single byte."""
        token_id = self._normal.get(_escaped(part))
        if token_id is None and len(part) == 1:
            return self._byte_ids[part[0]]
        return token_id

    def _segments(self, run: str) -> list[str]:
        """A text run as llama.cpp merges it ('▁' for spaces, the space prefix), cut between two characters no
        token has side by side."""
        if not run:
            return []
        text = ((" " + run) if self.add_space_prefix else run).replace(" ", SPACE)
        cuts = [i for i in range(1, len(text)) if (text[i - 1], text[i]) not in self._pairs]
        return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]

    def _symbols(self, segment: str) -> list[bytes]:
        """The first symbols: each character's UTF-8, or its single bytes when it is no normal token."""
        symbols: list[bytes] = []
        for char in segment:
            raw = char.encode("utf-8", errors="surrogatepass")
            symbols.extend([raw] if raw in self._normal else [raw[i:i + 1] for i in range(len(raw))])
        return symbols

    def _id(self, symbol: bytes) -> int:
        token_id = self._normal.get(symbol)
        return token_id if token_id is not None else self._byte_ids[symbol[0]]


def _merge(symbols: list[bytes], ranks: dict[bytes, int]) -> list[bytes]:
    """Join adjacent symbols, the pair with the lowest rank first (the leftmost on a tie), until no joined pair has a
    rank: llama.cpp's llm_tokenizer_spm_session with a heap of candidate pairs and a linked list of symbols."""
    n = len(symbols)
    if n < 2:
        return symbols
    size = [len(s) for s in symbols]
    nxt = list(range(1, n)) + [-1]
    prv = list(range(-1, n - 1))
    text = list(symbols)
    get = ranks.get
    heap: list[tuple[int, int, int]] = []
    for i in range(n - 1):
        if (rank := get(text[i] + text[i + 1])) is not None:
            heap.append((rank, i, size[i] + size[i + 1]))
    heapq.heapify(heap)
    while heap:
        _, left, joined = heapq.heappop(heap)
        right = nxt[left]
        if size[left] == 0 or right < 0 or size[left] + size[right] != joined:
            continue  # one of the pair was joined into something else since it was pushed
        text[left] += text[right]
        size[left], size[right] = joined, 0
        after = nxt[left] = nxt[right]
        if after >= 0:
            prv[after] = left
            if (rank := get(text[left] + text[after])) is not None:
                heapq.heappush(heap, (rank, left, joined + size[after]))
        before = prv[left]
        if before >= 0 and (rank := get(text[before] + text[left])) is not None:
            heapq.heappush(heap, (rank, before, size[before] + joined))
    return [s for s, k in zip(text, size, strict=True) if k]


def _text(token_id: int, token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"token {token_id} ({token!r}) is not UTF-8 text") from None


def _check_characters(normal: dict[bytes, int]) -> None:
    """ValueError unless every character inside a normal token is a normal token itself (then a character without
    a token never joins, so it can be its byte tokens from the start)."""
    for raw, token_id in normal.items():
        for char in raw.decode():
            if char.encode() not in normal:
                raise ValueError(f"normal token {token_id} ({raw.decode()!r}) holds the character {char!r}, which is "
                                 f"no token of its own; this app supports SentencePiece vocabularies whose "
                                 f"characters are all tokens")


def _adjacent(text: str) -> list[tuple[str, str]]:
    return [(text[i - 1], text[i]) for i in range(1, len(text))]


def _token_bytes(text: str, kind: int) -> bytes:
    if kind == TokenType.BYTE:
        return bytes([int(text[3:5], 16)])
    if kind == TokenType.NORMAL:
        return text.replace(SPACE, " ").encode()
    return text.encode()


def _shown(symbol: bytes) -> bytes:
    """A symbol as token_bytes spells it ('▁' as a space)."""
    return symbol.replace(SPACE.encode(), b" ")


def _escaped(part: bytes) -> bytes:
    """A part spelled as the vocabulary spells it (spaces as '▁')."""
    return part.replace(b" ", SPACE.encode())
