"""Readable token labels for the UI: the one function every page's token text goes through."""
from __future__ import annotations

_VISIBLE = {" ": "␣", "\n": "↵", "\r": "⏎", "\t": "⇥"}
_VISIBLE_TABLE = str.maketrans(_VISIBLE)


def readable_token(raw: bytes) -> str:
    """Label one token's bytes for display: '␣' for a space, '↵' newline, '⏎' carriage return, '⇥' tab, <U+XXXX>
    for other invisible characters, <0xNN> for bytes that are not whole UTF-8 characters."""
    try:                             # most tokens: whole characters, all printable once the four are marked
        shown = raw.decode("utf-8").translate(_VISIBLE_TABLE)
        if shown.isprintable():
            return shown
    except UnicodeDecodeError:
        pass
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


SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


class TokenLabel(str):
    """A token's label in a text where it holds part of a character ('我¹⁄₂'); `raw` is the token's own label,
    its bytes ('<0xE6><0x88>'), which hovers show beside it."""

    raw: str

    def __new__(cls, label: str, raw: str):
        made = super().__new__(cls, label)
        made.raw = raw
        return made

    def __reduce__(self):
        return TokenLabel, (str(self), self.raw)


def part_mark(part: int, parts: int) -> str:
    """'¹⁄₂': part `part` (from 1) of `parts`."""
    return f"{str(part).translate(SUPERSCRIPT)}⁄{str(parts).translate(SUBSCRIPT)}"


def _char_width(data: bytes, at: int) -> int:
    """The length of the UTF-8 character starting at `at`, 0 when the bytes there are not one."""
    for width in (1, 2, 3, 4):
        try:
            data[at:at + width].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return width
    return 0


def sequence_labels(raws: list[bytes]) -> list[str]:
    """Labels of tokens read as one text: each as readable_token labels it, except that a token holding part of a
    character the text spells over several tokens is labelled with that character and which part it is
    ('我¹⁄₂', '我²⁄₂'; a token ending one such character and starting the next: '我²⁄₂们¹⁄₂'), as a TokenLabel that
    keeps its bytes' label. Bytes that form no character even in the text stay <0xNN>."""
    labels: list[str] = [readable_token(raw) for raw in raws]
    if all("<0x" not in label for label in labels):
        return labels
    data = b"".join(raws)
    owner = [k for k, raw in enumerate(raws) for _ in raw]           # the token each byte of the text came from
    parts: dict[int, list[str]] = {}                                   # token -> its characters' labels, when split
    at = 0
    while at < len(data):
        width = _char_width(data, at) or 1
        tokens = sorted(set(owner[at:at + width]))
        if len(tokens) > 1:
            char = readable_token(data[at:at + width])
            for part, k in enumerate(tokens, start=1):
                parts.setdefault(k, []).append(char + part_mark(part, len(tokens)))
        else:
            parts.setdefault(tokens[0], []).append(readable_token(data[at:at + width]))
        at += width
    for k, label in enumerate(labels):
        if "<0x" in label and label != "".join(parts.get(k, [])):
            labels[k] = TokenLabel("".join(parts[k]), label)
    return labels
