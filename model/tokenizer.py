"""Byte-level BPE tokenizer built from a GGUF's vocab with tiktoken, plus readable token labels for the UI."""
from __future__ import annotations

import functools

import regex
import tiktoken

# Splits like the original tokenizer: GPT-2's pattern, but every digit on its own.
SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"""
CONTROL_TOKEN_TYPE = 3


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
    """tiktoken Encoding over the GGUF vocab: token id == tiktoken rank (single bytes first, then merge order)."""

    def __init__(self, tokens: list[bytes], token_types: list[int], name: str = "gguf"):
        to_byte = _unicode_to_byte()
        ranks: dict[bytes, int] = {}
        specials: dict[str, int] = {}
        for token_id, (token, kind) in enumerate(zip(tokens, token_types, strict=True)):
            text = token.decode("utf-8")
            if kind == CONTROL_TOKEN_TYPE:
                specials[text] = token_id
            else:
                ranks.setdefault(bytes(to_byte[c] for c in text), token_id)
        self.vocab_size = len(tokens)
        self.special_ids = frozenset(specials.values())
        self._id_bytes = {i: b for b, i in ranks.items()} | {i: s.encode() for s, i in specials.items()}
        self._missing = bytes(b for b in range(256) if bytes([b]) not in ranks)  # bytes no token covers
        # Characters whose UTF-8 contains a missing byte: control chars and planes 4-11.
        self._needs_slow_path = regex.compile(
            "[" + "".join(f"\\x{b:02x}" for b in self._missing if b < 0x80) + "\U00040000-\U000bffff]")
        self._split = regex.compile(SPLIT_PATTERN)
        self._encoding = tiktoken.Encoding(name, pat_str=SPLIT_PATTERN, mergeable_ranks=ranks,
                                           special_tokens=specials)

    @property
    def missing_bytes(self) -> bytes:
        """Byte values that no token covers; they are dropped, as the reference tokenizer does."""
        return self._missing

    def encode(self, text: str) -> list[int]:
        """Token ids of text; control-token strings such as <|im_start|> are encoded as ordinary text."""
        if not self._needs_slow_path.search(text):
            return self._encoding.encode_ordinary(text)
        ids: list[int] = []
        for piece in self._split.findall(text):
            raw = piece.encode("utf-8", errors="surrogatepass").translate(None, self._missing)
            if raw:
                ids.extend(self._encoding._encode_single_piece(raw))
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        return self._id_bytes[token_id]

    def decode(self, ids: list[int]) -> str:
        return b"".join(self._id_bytes[i] for i in ids).decode("utf-8", errors="replace")

    def token_strings(self, ids: list[int]) -> list[str]:
        """Readable labels: '␣' for a leading space, '↵' for newline, '⇥' for tab, <0xNN> for partial UTF-8."""
        return [readable_token(self._id_bytes[i]) for i in ids]


_VISIBLE = {" ": "␣", "\n": "↵", "\r": "⏎", "\t": "⇥"}


def readable_token(raw: bytes) -> str:
    """Label one token's bytes for display; bytes that are not whole UTF-8 characters are shown as hex."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        for width in (1, 2, 3, 4):
            try:
                char = raw[i:i + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            out.append(f"<0x{raw[i]:02X}>")
            i += 1
            continue
        i += width
        if char in _VISIBLE:
            out.append(_VISIBLE[char])
        elif not char.isprintable():
            out.append(f"<U+{ord(char):04X}>")
        else:
            out.append(char)
    return "".join(out)
