"""Integer codes of a few bits packed row by row into planes that unpack in a few long torch passes (GGUF's own blocks
interleave their fields every 16 or 32 bytes: runs too short for torch to vectorise).

A code of `bits` bits is split into fields, low bits first: 8 = 8, 6 = 4 + 2, 5 = 4 + 1, 4 = 4, 3 = 2 + 1, 2 = 2.
For a row of C codes a field of width w < 8 is a plane [rows, C * w / 8]:
- w = 4 or 2: field k (bits w*k..) of byte j is code k * (C * w / 8) + j, so field k of a whole row is one run,
  unpacked by one shift and one mask;
- w = 1: bit k of byte j is code 8j + k (numpy's packbits order); a byte expands to 8 codes through a 256-entry
  table of int64 (torch's index_select), three passes where eight shifts and masks would be ten.
Unpacking writes only into the buffers it is given.
"""
from __future__ import annotations

import numpy as np
import torch

WIDTHS = {8: (8,), 6: (4, 2), 5: (4, 1), 4: (4,), 3: (2, 1), 2: (2,)}   # code bits -> field widths, low first
# Scalars as 0-dim uint8 tensors: a Python int costs a conversion per call (~2 us here, ~40 calls per chunk).
_U8 = {k: torch.tensor(k, dtype=torch.uint8) for k in (2, 3, 4, 6, 8, 15, 16, 32)}
_BYTE_BITS = (torch.arange(256)[:, None] >> torch.arange(8)) & 1                                 # [256, 8]


def _spread_bits(shift: int, offset: int) -> torch.Tensor:
    """[256] int64 whose byte k is (bit k of the index) << shift, plus offset (mod 256)."""
    values = ((_BYTE_BITS << shift) + offset) % 256                                              # [256, 8]
    return (values << (8 * torch.arange(8))).sum(dim=1)


_SPREAD = {(shift, offset): _spread_bits(shift, offset) for shift, offset in ((4, 0), (4, -16), (2, 0), (2, -4))}


def pack(codes: torch.Tensor, bits: int) -> list[torch.Tensor]:
    """codes [rows, C] uint8 (each < 2**bits) -> one uint8 plane per field: [rows, C * width / 8]."""
    planes, shift = [], 0
    for width in WIDTHS[bits]:
        field = (codes >> shift) & ((1 << width) - 1)                                           # [rows, C]
        if width == 8:
            planes.append(field)
        elif width == 1:
            planes.append(torch.from_numpy(np.packbits(field.numpy(), axis=1, bitorder="little")))
        else:
            runs = field.view(len(codes), 8 // width, -1)                                       # [rows, 8 / w, n]
            plane = runs[:, 0].clone()
            for k in range(1, 8 // width):
                plane |= runs[:, k] << (width * k)
            planes.append(plane)
        shift += width
    return planes


def unpack(planes: list[torch.Tensor], bits: int, out: torch.Tensor, scratch: torch.Tensor, offset: int = 0) -> None:
    """The inverse of pack, plus offset: planes of r rows -> out [r, C] uint8 (contiguous) = codes + offset (mod 256;
    a bit plane's table adds it for free). scratch is uint8 of at least 2 * out.numel() elements."""
    n = out.numel()
    shift = 0
    for plane, width in zip(planes, WIDTHS[bits], strict=True):
        target = out if shift == 0 else scratch[:n].view(out.shape)                             # [r, C]
        if width == 8:
            target.copy_(plane)
        elif width == 1:
            index = scratch[n:2 * n].view(torch.int64)                                          # [r * C / 8]
            index.copy_(plane.view(-1))
            torch.index_select(_SPREAD[shift, offset], 0, index, out=target.view(-1).view(torch.int64))
            offset = 0
        else:
            _unpack_runs(plane, width, target)
            if shift:
                target.bitwise_left_shift_(_U8[shift])
        if shift:
            out.add_(target)
        shift += width
    if offset:
        out.sub_(_U8[-offset])


def _unpack_runs(plane: torch.Tensor, width: int, out: torch.Tensor) -> None:
    """A plane of w-bit fields in runs (w = 4 or 2) -> out [r, C] uint8: field k is plane >> (w * k), masked (the
    top field needs no mask: the shift clears the bits above it)."""
    fields = out.view(len(out), 8 // width, -1)                                                 # [r, 8 / w, run]
    mask = _U8[(1 << width) - 1]
    torch.bitwise_and(plane, mask, out=fields[:, 0])
    for k in range(1, 8 // width):
        torch.bitwise_right_shift(plane, _U8[width * k], out=fields[:, k])
    if width == 2:
        fields[:, 1:-1].bitwise_and_(mask)
