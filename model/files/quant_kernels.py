"""GGUF blocks taken apart, one function per block format: uint8 blocks [nb, block bytes] -> Fields, an integer
code per value (uint8, in the tensor's value order) and the scales of each block.

model.files.quants turns Fields into float32 with the gguf package's arithmetic (gguf/quants.py, the reference) in
its order; codes and scales are its integers exactly, so results are bit-identical. Bit fiddling runs on int16
words of whole blocks where it can: uint8 ops on 16- or 32-byte slices of a block are not vectorised by torch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

QK = 32           # values per block of the simple formats
QK_K = 256        # values per K-quant super-block
_MASKS = {4: 0x0F0F, 2: 0x0303, 1: 0x0101}                           # one w-bit field in each byte of an int16
_CRUMB_SHIFTS = torch.tensor([0, 2, 4, 6], dtype=torch.uint8)[:, None]                         # [4, 1]


@dataclass
class Fields:
    """A chunk of blocks taken apart. A value's integer is its code (codes read as int8 after adding the format's
    offset, for signed formats); value = integer * d (or * (d * sc) per group), then + dmin, or - dmin * mn."""

    codes: torch.Tensor                  # [nb, V] uint8
    d: torch.Tensor                      # [nb, 1] float32
    sc: torch.Tensor | None = None       # [nb, groups] uint8 or int8: group scales (K-quants)
    dmin: torch.Tensor | None = None     # [nb, 1] float32: the minimum (Q4_1, Q5_1) or the K-quant min scale
    mn: torch.Tensor | None = None       # [nb, groups] uint8: group minimums (K-quants)


def _fp16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """The fp16 at byte `start` of every block, as float32 [nb, 1]."""
    return blocks[:, start:start + 2].view(torch.float16).float()                               # [nb, 1]


def _fields(blocks: torch.Tensor, start: int, stop: int, runs: int, width: int) -> torch.Tensor:
    """The w-bit fields of bytes start:stop of every block, split in `runs` runs: [nb, runs, 8 / w, run bytes]
    uint8, each run's fields k = 0, 1, .. in turn (gguf's order). Shifts go over whole blocks as int16 words (one
    long pass each; an arithmetic shift's sign bits never reach the mask), then the bytes wanted are copied out."""
    words = blocks.view(torch.int16)                                                             # [nb, B / 2]
    n = (stop - start) // 2 // runs
    fields = torch.empty(len(blocks), runs, 8 // width, n, dtype=torch.int16)                    # [nb, runs, f, n]
    for k in range(8 // width):
        shifted = words >> (width * k) if k else words
        fields[:, :, k] = shifted[:, start // 2:stop // 2].view(len(blocks), runs, n)
    return fields.bitwise_and_(_MASKS[width]).view(torch.uint8).view(len(blocks), runs, 8 // width, 2 * n)


def _nibbles(blocks: torch.Tensor, start: int, runs: int) -> torch.Tensor:
    """The 4-bit codes in bytes start.. (to the block's end): [nb, values] uint8, each run's low nibbles, then its
    high nibbles."""
    return _fields(blocks, start, blocks.shape[1], runs, 4).view(len(blocks), -1)


def _bits_in_order(packed: torch.Tensor) -> torch.Tensor:
    """packed [nb, 4] uint8 (a little-endian uint32 per block) -> [nb, 32] uint8: bit j (0 or 1). Eight bits at a
    time: byte b copied into all eight bytes of an int64 (b * 0x01010101, twice), & 0x8040..01 keeps bit k in
    byte k."""
    spread = packed.to(torch.int64).mul_(0x01010101)                                            # [nb, 4]
    spread.bitwise_or_(spread << 32).bitwise_and_(-0x7FBFDFEFF7FBFDFF)                          # & 0x8040201008040201
    return spread.view(torch.uint8).ne_(0).view(len(packed), QK)                                # [nb, 32]


def _bit_planes(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """The 32 bytes of high bits at `start` -> [nb, 8, 32] uint8 0/1: entry (k, i) is bit k of byte i."""
    return _fields(blocks, start, start + 32, 1, 1).view(len(blocks), 8, QK)


def _k_scales(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12 bytes of 6-bit scales and minimums of Q4_K / Q5_K: [nb, 12] -> sc, mn, each [nb, 8] uint8."""
    d, m, m_d = scales[:, 0:4], scales[:, 4:8], scales[:, 8:12]                                  # [nb, 4] each
    sc = torch.cat((d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)), dim=1)                          # [nb, 8]
    mn = torch.cat((m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)), dim=1)                            # [nb, 8]
    return sc, mn


def q8_0(blocks: torch.Tensor) -> Fields:
    """[nb, 34]: fp16 d, 32 int8 q. value = q * d."""
    return Fields(blocks[:, 2:].contiguous(), _fp16(blocks, 0))


def q4_0(blocks: torch.Tensor) -> Fields:
    """[nb, 18]: fp16 d, 16 bytes of nibbles. value = d * (q - 8)."""
    return Fields(_nibbles(blocks, 2, 1), _fp16(blocks, 0))


def q4_1(blocks: torch.Tensor) -> Fields:
    """[nb, 20]: fp16 d, fp16 m, 16 bytes of nibbles. value = d * q + m."""
    return Fields(_nibbles(blocks, 4, 1), _fp16(blocks, 0), dmin=_fp16(blocks, 2))


def q5_0(blocks: torch.Tensor) -> Fields:
    """[nb, 22]: fp16 d, 32 high bits, 16 bytes of low nibbles. value = d * (q - 16)."""
    codes = _nibbles(blocks, 6, 1)                                                               # [nb, 32]
    codes.add_(_bits_in_order(blocks[:, 2:6]), alpha=16)
    return Fields(codes, _fp16(blocks, 0))


def q5_1(blocks: torch.Tensor) -> Fields:
    """[nb, 24]: fp16 d, fp16 m, 32 high bits, 16 bytes of low nibbles. value = d * q + m."""
    codes = _nibbles(blocks, 8, 1)                                                               # [nb, 32]
    codes.add_(_bits_in_order(blocks[:, 4:8]), alpha=16)
    return Fields(codes, _fp16(blocks, 0), dmin=_fp16(blocks, 2))


def q2_k(blocks: torch.Tensor) -> Fields:
    """[nb, 84]: 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit q, fp16 d, fp16 dmin.
    value = (d * sc) * q - dmin * m, per 16 values."""
    scales = blocks[:, :16]                                                                      # [nb, 16]
    codes = _fields(blocks, 16, 80, 2, 2)                                                        # [nb, 2, 4, 32]
    return Fields(codes.reshape(len(blocks), QK_K), _fp16(blocks, 80), scales & 0x0F,
                  _fp16(blocks, 82), scales >> 4)


def q3_k(blocks: torch.Tensor) -> Fields:
    """[nb, 110]: 32 bytes of high bits, 64 bytes of 2-bit q, 12 bytes of 6-bit scales, fp16 d.
    value = (d * (sc - 32)) * (q + 4 * high bit - 4), per 16 values."""
    low, high = blocks[:, 96:104], blocks[:, 104:108]                                            # [nb, 8], [nb, 4]
    sc = torch.cat((low & 0x0F, low >> 4), dim=1)                                                # [nb, 16]
    sc.view(-1, 4, 4).bitwise_or_(((high[:, None, :] >> _CRUMB_SHIFTS) & 0x03) << 4)           # [nb, 4, 4]
    codes = _fields(blocks, 32, 96, 2, 2).view(len(blocks), 8, QK)                              # [nb, 8, 32]
    codes.add_(_bit_planes(blocks, 0), alpha=4)
    return Fields(codes.view(len(blocks), QK_K), _fp16(blocks, 108), sc.sub_(32).view(torch.int8))


def q4_k(blocks: torch.Tensor) -> Fields:
    """[nb, 144]: fp16 d, fp16 dmin, 12 bytes of 6-bit scales / mins, 128 bytes of nibbles.
    value = (d * sc) * q - dmin * m, per 32 values."""
    sc, mn = _k_scales(blocks[:, 4:16])                                                          # [nb, 8] each
    return Fields(_nibbles(blocks, 16, 4), _fp16(blocks, 0), sc, _fp16(blocks, 2), mn)


def q5_k(blocks: torch.Tensor) -> Fields:
    """[nb, 176]: fp16 d, fp16 dmin, 12 bytes of 6-bit scales / mins, 32 bytes of high bits, 128 bytes of nibbles.
    value = (d * sc) * q - dmin * m, per 32 values."""
    sc, mn = _k_scales(blocks[:, 4:16])                                                          # [nb, 8] each
    codes = _nibbles(blocks, 48, 4).view(len(blocks), 8, QK)                                     # [nb, 8, 32]
    codes.add_(_bit_planes(blocks, 16), alpha=16)
    return Fields(codes.view(len(blocks), QK_K), _fp16(blocks, 0), sc, _fp16(blocks, 2), mn)


def q6_k(blocks: torch.Tensor) -> Fields:
    """[nb, 210]: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales, fp16 d.
    value = (d * sc) * (q - 32), per 16 values."""
    low = _fields(blocks, 0, 128, 2, 4).view(len(blocks), 2, 4, QK)                             # [nb, 2, 2 * 2, 32]
    high = _fields(blocks, 128, 192, 2, 2)                                                       # [nb, 2, 4, 32]
    codes = low.add_(high.bitwise_left_shift_(4))                                                # [nb, 2, 4, 32]
    return Fields(codes.view(len(blocks), QK_K), _fp16(blocks, 208),
                  blocks[:, 192:208].view(torch.int8))
