"""Byte-level BPE (GGUF tokenizer model "gpt2": GPT-2, Llama 3, Qwen, SmolLM) built from a GGUF's vocab with
tiktoken: the file's pre-tokenizer cuts the text, tiktoken merges each piece."""
from __future__ import annotations

import functools

import tiktoken

from model.tokenizers.base import TokenType
from model.tokenizers.labels import readable_token, sequence_labels
from model.tokenizers.pretokenizers import PRE_TOKENIZERS, pre_tokenizer
from model.tokenizers.specials import SpecialSplitter

ADD_BOS_BY_DEFAULT = frozenset(name for name, pre in PRE_TOKENIZERS.items() if pre.add_bos)
SPECIAL_TOKEN_TYPES = (TokenType.CONTROL, TokenType.USER_DEFINED)  # matched whole in the text, one id each


@functools.cache
def _unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: the printable stand-in character -> the raw byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


class Tokenizer:
    """tiktoken merges over the GGUF vocab: token id == tiktoken rank.

    tiktoken joins the adjacent pair whose joined bytes have the lowest rank, and takes a piece that is a whole
    token at once; that is BPE's merge order when the ids of merge results follow the merge list, so that is
    checked (ValueError otherwise). Control and user-defined tokens written in the text (e.g. <|im_start|>) become
    their single id, as `tokenizers` does. Bytes no token covers are dropped, as `tokenizers` does.
    """

    def __init__(self, tokens: list[bytes], token_types: list[int], merges: list[bytes] | None = None,
                 pre: str = "smollm", bos_token_id: int | None = None, name: str = "gguf",
                 eos_token_id: int | None = None):
        """merges: the GGUF merge list ("a b" each), checked against the ids; pre: tokenizer.ggml.pre;
        bos_token_id: prepended by encode (None: nothing is)."""
        to_byte = _unicode_to_byte()
        self._pre = pre_tokenizer(pre)
        ranks: dict[bytes, int] = {}
        specials: dict[str, int] = {}
        for token_id, (token, kind) in enumerate(zip(tokens, token_types, strict=True)):
            text = token.decode("utf-8")
            if kind in SPECIAL_TOKEN_TYPES:
                specials.setdefault(text, token_id)
            elif kind == TokenType.NORMAL:
                try:
                    ranks.setdefault(bytes(to_byte[c] for c in text), token_id)
                except KeyError:
                    raise ValueError(f"token {token_id} ({text!r}) is not a byte-level BPE token") from None
        if merges is not None:
            _check_merge_order(tokens, token_types, merges)
        for kind, token_id in (("BOS", bos_token_id), ("EOS", eos_token_id)):
            if token_id is not None and not 0 <= token_id < len(tokens):
                raise ValueError(f"its {kind} token id {token_id} is outside the vocabulary (0..{len(tokens) - 1})")
        self.vocab_size = len(tokens)
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.prefix_ids = () if bos_token_id is None else (bos_token_id,)  # what encode puts before the text
        self._specials = SpecialSplitter(specials)
        self.special_ids = frozenset(self._specials.ids.values())
        self._id_bytes = {i: b for b, i in ranks.items()} | {i: s.encode() for s, i in self._specials.ids.items()}
        for token_id, token in enumerate(tokens):  # unknown / unused tokens: never produced, decoded as written
            self._id_bytes.setdefault(token_id, token)
        self._ranks = ranks
        self._missing = bytes(b for b in range(256) if bytes([b]) not in ranks)  # bytes no token covers
        # tiktoken only merges: its own split pattern is never used (the pre-tokenizer cuts the text).
        self._encoding = tiktoken.Encoding(name, pat_str=r"[\s\S]+", mergeable_ranks=ranks, special_tokens={})

    @property
    def missing_bytes(self) -> bytes:
        """Byte values that no token covers; they are dropped, as the reference tokenizer does."""
        return self._missing

    def encode(self, text: str) -> list[int]:
        """Token ids of text, after the BOS id when the model file asks for one. Control-token strings such as
        <|im_start|> become their single id; "<|im_" and the like stay text."""
        ids = list(self.prefix_ids)
        for i, part in enumerate(self._specials.split(text)):
            if i % 2:
                ids.append(self._specials.ids[part])
            else:
                for piece in self._pre.split(part):
                    raw = piece.encode("utf-8", errors="surrogatepass").translate(None, self._missing)
                    if raw:
                        ids.extend(self._encoding._encode_single_piece(raw))
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        return self._id_bytes[token_id]

    def decode(self, ids: list[int]) -> str:
        return b"".join(self._id_bytes[i] for i in ids).decode("utf-8", errors="replace")

    def token_strings(self, ids: list[int]) -> list[str]:
        """Readable labels of ids read as one text: '␣' for a leading space, '↵' for newline, '⇥' for tab, a
        character split over tokens as its parts ('我¹⁄₂'), <0xNN> for other partial UTF-8; control tokens as
        written ("<|im_start|>")."""
        return sequence_labels([self._id_bytes[i] for i in ids])

    def token_label(self, token_id: int) -> str:
        """One token's readable label on its own (a candidate, not part of a text)."""
        return readable_token(self._id_bytes[token_id])

    def pieces(self, text: str) -> list[str]:
        """text split as encode splits it: control-token strings whole, the rest by the pre-tokenizer."""
        return [p for i, part in enumerate(self._specials.split(text))
                for p in ([part] if i % 2 else self._pre.split(part))]

    def special_id(self, piece: str) -> int | None:
        """The id of a control / user-defined token written as piece, None for ordinary text."""
        return self._specials.ids.get(piece)

    def initial_parts(self, piece: str) -> list[bytes]:
        """The piece's UTF-8 bytes one by one, less bytes no token covers (dropped, as encode does)."""
        raw = piece.encode("utf-8", errors="surrogatepass").translate(None, self._missing)
        return [raw[i:i + 1] for i in range(len(raw))]

    def rank(self, part: bytes) -> int | None:
        """BPE rank of a byte string (== its token id; lower merges first), None if no ordinary token has it."""
        return self._ranks.get(part)

    def part_id(self, part: bytes) -> int | None:
        """The token id of a byte string (== its rank), None if no ordinary token has it."""
        return self._ranks.get(part)


def _check_merge_order(tokens: list[bytes], token_types: list[int], merges: list[bytes]) -> None:
    """ValueError unless every normal token is one byte or made by a merge, and merge results' ids never go down
    along the merge list (then tiktoken's rank order is BPE's merge order)."""
    ids = {}
    for token_id, token in enumerate(tokens):
        ids.setdefault(token, token_id)
    made = set()
    last = -1
    for i, merge in enumerate(merges):
        cut = merge.find(b" ", 1)
        left, right = (merge[:cut], merge[cut + 1:]) if cut > 0 else (merge, b"")
        token_id = ids.get(left + right)
        if cut <= 0 or token_id is None or token_types[token_id] != TokenType.NORMAL:
            raise ValueError(f"its merge #{i} ({merge.decode('utf-8', 'replace')!r}) does not make a normal token")
        if token_id < last:
            raise ValueError(f"its token ids are not in merge order (merge #{i} makes id {token_id} after id "
                             f"{last}); this app supports vocabularies whose ids follow the merge list")
        last = token_id
        made.add(token_id)
    stray = [i for i, (token, kind) in enumerate(zip(tokens, token_types, strict=True))
             if kind == TokenType.NORMAL and i not in made and len(token.decode("utf-8")) != 1]
    if stray:
        raise ValueError(f"{len(stray)} normal tokens (first: id {stray[0]}) are neither a single byte nor made by "
                         f"a merge; this app supports plain byte-level BPE vocabularies only")
