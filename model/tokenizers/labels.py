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
