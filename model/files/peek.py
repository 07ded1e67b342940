"""A GGUF's general.architecture read from the first bytes of its header, without parsing the rest (the vocabulary
arrays): for choosing the loader of a file (model.load_model) before reading it."""
from __future__ import annotations

import struct
from pathlib import Path

# GGUF value types -> bytes of one value (8: string, 9: array are read apart)
SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
KEYS_LOOKED_AT = 64          # general.architecture comes first in every converter's file
MAX_KEY_BYTES = 1 << 16
MAX_SKIPPED_STRINGS = 1 << 12   # a longer string array before general.architecture: left to the full reader


def architecture_of(path: str | Path) -> str | None:
    """The file's general.architecture, None when the header cannot say (not a GGUF, an old or big-endian one, a
    damaged header, the key far down or absent): the full reader then says what is wrong."""
    try:
        with Path(path).open("rb") as f:
            magic, version = f.read(4), struct.unpack("<I", f.read(4))[0]
            if magic != b"GGUF" or version not in (2, 3):
                return None
            _, n_kv = struct.unpack("<QQ", f.read(16))
            for _ in range(min(n_kv, KEYS_LOOKED_AT)):
                key = _string(f).decode("utf-8")
                kind = struct.unpack("<I", f.read(4))[0]
                if key == "general.architecture":
                    return _string(f).decode("utf-8") if kind == STRING else None
                _skip(f, kind)
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        return None
    return None


def _string(f) -> bytes:
    (length,) = struct.unpack("<Q", f.read(8))
    if length > MAX_KEY_BYTES:
        raise ValueError("string too long for a header key")
    value = f.read(length)
    if len(value) != length:
        raise ValueError("past the end")
    return value


def _skip(f, kind: int) -> None:
    if kind == STRING:
        (length,) = struct.unpack("<Q", f.read(8))
        f.seek(length, 1)
    elif kind == ARRAY:
        item, count = struct.unpack("<IQ", f.read(12))
        if item == STRING:
            if count > MAX_SKIPPED_STRINGS:
                raise ValueError("a long string array first")
            for _ in range(count):
                _skip(f, STRING)
        elif item in SCALAR_BYTES:
            f.seek(SCALAR_BYTES[item] * count, 1)
        else:
            raise ValueError("nested array")
    elif kind in SCALAR_BYTES:
        f.seek(SCALAR_BYTES[kind], 1)
    else:
        raise ValueError(f"unknown value type {kind}")
