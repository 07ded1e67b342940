"""Integer codes of a few bits packed row by row into planes that unpack in a few contiguous passes (GGUF's own blocks
interleave their fields every 16 or 32 bytes, runs too short for torch to vectorise).

A code of `bits` bits is split into fields, low bits first: 8 bits stay bytes; 4 bits are a nibble plane; every
other bit is a plane of single bits (6 = 4 + 1 + 1, 5 = 4 + 1, 3 = 1 + 1 + 1, 2 = 1 + 1). For a row of C codes a
nibble plane is [rows, C / 2]: byte j holds code j (low nibble) and code j + C / 2 (high nibble), so each half
unpacks as one int32 pass; a bit plane is [rows, C / 8], numpy's packbits order (bit k of byte j is code 8j + k),
which numpy's unpackbits expands at several GB/s (torch has no such op).
"""
from __future__ import annotations

import numpy as np
import torch

WIDTHS = {8: (8,), 6: (4, 1, 1), 5: (4, 1), 4: (4,), 3: (1, 1, 1), 2: (1, 1)}   # code bits -> fields, low first
_NIBBLES = 0x0F0F0F0F


def pack(codes: torch.Tensor, bits: int) -> list[torch.Tensor]:
    """codes [rows, C] uint8 (each < 2**bits) -> one uint8 plane per field: [rows, C * width / 8]."""
    planes, shift = [], 0
    for width in WIDTHS[bits]:
        field = (codes >> shift) & ((1 << width) - 1)                                           # [rows, C]
        if width == 8:
            planes.append(field)
        elif width == 4:
            low, high = field.chunk(2, dim=1)                                                   # [rows, C / 2] each
            planes.append(low | (high << 4))
        else:
            planes.append(torch.from_numpy(np.packbits(field.numpy(), axis=1, bitorder="little")))
        shift += width
    return planes


def unpack(planes: list[torch.Tensor], bits: int, out: torch.Tensor) -> None:
    """The inverse of pack: planes of r rows -> out [r, C] uint8 (contiguous)."""
    shift = 0
    for plane, width in zip(planes, WIDTHS[bits], strict=True):
        if width == 8:
            out.copy_(plane)
        elif width == 4:
            words = plane.view(torch.int32)                                                     # [r, C / 8]
            halves = out.view(torch.int32).view(len(out), 2, -1)                                # [r, 2, C / 8]
            torch.bitwise_and(words, _NIBBLES, out=halves[:, 0])
            torch.bitwise_right_shift(words, 4, out=halves[:, 1]).bitwise_and_(_NIBBLES)
        else:
            bit = torch.from_numpy(np.unpackbits(plane.numpy(), axis=1, bitorder="little"))      # [r, C] of 0 / 1
            if shift:
                out.add_(bit, alpha=1 << shift)
            else:
                out.copy_(bit)
        shift += width
