"""Byte-level BPE tokenizer built from a GGUF's vocab with tiktoken, plus readable token labels for the UI."""
from __future__ import annotations

import functools

import regex
import tiktoken

# Pre-tokenizer split patterns by GGUF `tokenizer.ggml.pre` (llama.cpp src/llama-vocab.cpp names them; these are
# the patterns of the original tokenizer.json files, as one regex each).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# SmolLM: GPT-2's pattern, but every digit on its own (tokenizers: Digits(individual_digits) then ByteLevel).
SMOLLM_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
SPLIT_PATTERNS = {
    "smollm": SMOLLM_PATTERN,
    "llama-bpe": LLAMA3_PATTERN, "llama3": LLAMA3_PATTERN, "llama-v3": LLAMA3_PATTERN,
    "gpt-2": GPT2_PATTERN, "gpt2": GPT2_PATTERN,
}
ADD_BOS_BY_DEFAULT = frozenset({"llama-bpe", "llama3", "llama-v3"})  # llama.cpp's default without add_bos_token
NORMAL_TOKEN_TYPE = 1
CONTROL_TOKEN_TYPE = 3
USER_DEFINED_TOKEN_TYPE = 4
SPECIAL_TOKEN_TYPES = (CONTROL_TOKEN_TYPE, USER_DEFINED_TOKEN_TYPE)  # matched whole in the text, one id each


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


def split_pattern(pre: str) -> str:
    """The split regex for a GGUF pre-tokenizer name; ValueError naming it when it is not supported."""
    if pre not in SPLIT_PATTERNS:
        raise ValueError(f"its pre-tokenizer '{pre}' (tokenizer.ggml.pre) is not supported by this app; supported: "
                         f"{', '.join(sorted(SPLIT_PATTERNS))}")
    return SPLIT_PATTERNS[pre]


class Tokenizer:
    """tiktoken Encoding over the GGUF vocab: token id == tiktoken rank.

    tiktoken merges the adjacent pair whose result has the lowest rank; that is BPE's merge order only when the
    ids of merge results follow the merge list, so that is checked (ValueError otherwise). Control and
    user-defined tokens written in the text (e.g. <|im_start|>) become their single id, as `tokenizers` does.
    """

    def __init__(self, tokens: list[bytes], token_types: list[int], merges: list[bytes] | None = None,
                 pre: str = "smollm", bos_token_id: int | None = None, name: str = "gguf"):
        """merges: the GGUF merge list ("a b" each), checked against the ids; bos_token_id: prepended by encode."""
        to_byte = _unicode_to_byte()
        pattern = split_pattern(pre)
        ranks: dict[bytes, int] = {}
        specials: dict[str, int] = {}
        for token_id, (token, kind) in enumerate(zip(tokens, token_types, strict=True)):
            text = token.decode("utf-8")
            if kind in SPECIAL_TOKEN_TYPES:
                specials.setdefault(text, token_id)
            elif kind == NORMAL_TOKEN_TYPE:
                try:
                    ranks.setdefault(bytes(to_byte[c] for c in text), token_id)
                except KeyError:
                    raise ValueError(f"token {token_id} ({text!r}) is not a byte-level BPE token") from None
        if merges is not None:
            _check_merge_order(tokens, token_types, merges)
        if bos_token_id is not None and not 0 <= bos_token_id < len(tokens):
            raise ValueError(f"its BOS token id {bos_token_id} is outside the vocabulary (0..{len(tokens) - 1})")
        self.vocab_size = len(tokens)
        self.bos_token_id = bos_token_id
        self.prefix_ids = () if bos_token_id is None else (bos_token_id,)  # what encode puts before the text
        self.special_ids = frozenset(specials.values())
        self._id_bytes = {i: b for b, i in ranks.items()} | {i: s.encode() for s, i in specials.items()}
        for token_id, token in enumerate(tokens):  # unknown / unused tokens: never produced, decoded as written
            self._id_bytes.setdefault(token_id, token)
        self._specials = specials
        # Longest first: at one position the longest special wins, as in tokenizers' added-token matching.
        self._special_split = regex.compile("(" + "|".join(
            regex.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")") if specials else None
        self._missing = bytes(b for b in range(256) if bytes([b]) not in ranks)  # bytes no token covers
        # Characters whose UTF-8 contains a missing byte: control chars and planes 4-11.
        self._needs_slow_path = regex.compile(
            "[" + "".join(f"\\x{b:02x}" for b in self._missing if b < 0x80) + "\U00040000-\U000bffff]")
        self._split = regex.compile(pattern)
        self._encoding = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})

    @property
    def missing_bytes(self) -> bytes:
        """Byte values that no token covers; they are dropped, as the reference tokenizer does."""
        return self._missing

    def encode(self, text: str) -> list[int]:
        """Token ids of text, after the BOS id when the model file asks for one. Control-token strings such as
        <|im_start|> become their single id; "<|im_" and the like stay text."""
        ids = list(self.prefix_ids)
        if self._special_split is None:
            return ids + self._encode_ordinary(text)
        for i, part in enumerate(self._special_split.split(text)):
            if i % 2:
                ids.append(self._specials[part])
            elif part:
                ids.extend(self._encode_ordinary(part))
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
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
        """Readable labels: '␣' for a leading space, '↵' for newline, '⇥' for tab, <0xNN> for partial UTF-8;
        control tokens as written ("<|im_start|>")."""
        return [readable_token(self._id_bytes[i]) for i in ids]

    def pieces(self, text: str) -> list[str]:
        """text split as encode splits it: control-token strings whole, the rest by the pre-tokenizer pattern."""
        parts = self._special_split.split(text) if self._special_split is not None else [text]
        return [p for i, part in enumerate(parts) for p in ([part] if i % 2 else self._split.findall(part))]

    def special_id(self, piece: str) -> int | None:
        """The id of a control / user-defined token written as piece, None for ordinary text."""
        return self._specials.get(piece)

    def rank(self, piece: bytes) -> int | None:
        """BPE rank of a byte string (== its token id; lower merges first), None if no ordinary token has it."""
        return self._encoding._mergeable_ranks.get(piece)


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
        if cut <= 0 or token_id is None or token_types[token_id] != NORMAL_TOKEN_TYPE:
            raise ValueError(f"its merge #{i} ({merge.decode('utf-8', 'replace')!r}) does not make a normal token")
        if token_id < last:
            raise ValueError(f"its token ids are not in merge order (merge #{i} makes id {token_id} after id "
                             f"{last}); this app supports vocabularies whose ids follow the merge list")
        last = token_id
        made.add(token_id)
    stray = [i for i, (token, kind) in enumerate(zip(tokens, token_types, strict=True))
             if kind == NORMAL_TOKEN_TYPE and i not in made and len(token.decode("utf-8")) != 1]
    if stray:
        raise ValueError(f"{len(stray)} normal tokens (first: id {stray[0]}) are neither a single byte nor made by "
                         f"a merge; this app supports plain byte-level BPE vocabularies only")


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
