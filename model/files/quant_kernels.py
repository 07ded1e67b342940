"""Torch dequantization kernels, one per GGUF block format: uint8 blocks [nb, block bytes] -> float32 [nb, block
values], written into `out`.

Each does the float32 arithmetic of the gguf package's numpy code (gguf/quants.py, the reference) in the same
order, so results are bit-identical: a K-quant's sub-block scale is d * sc (float32) first, then times q, minus
dmin * m. Bit fiddling runs on uint8 (4x less memory than float32; signed offsets such as q - 32 wrap in uint8 and
are read back as int8), and only the last two or three passes touch float32.
"""
from __future__ import annotations

import torch

QK = 32           # values per block of the simple formats
QK_K = 256        # values per K-quant super-block


def _bit_table(set_value: int, clear_value: int) -> torch.Tensor:
    """[256, 8] uint8: for byte b, entry i is set_value where bit i of b is 1, clear_value where it is 0 (mod 256)."""
    bits = (torch.arange(256)[:, None] >> torch.arange(8)) & 1                                   # [256, 8]
    return torch.where(bits == 1, set_value, clear_value).remainder(256).to(torch.uint8)


_HIGH_BIT_16 = _bit_table(16, 0)              # Q5_1, Q5_K: fifth bit worth 16
_HIGH_BIT_16_MINUS_16 = _bit_table(0, -16)    # Q5_0: fifth bit worth 16, then - 16
_Q3_HIGH_MINUS_4 = _bit_table(0, -4)          # Q3_K: - 4 where the high-mask bit is clear
_CRUMB_SHIFTS = torch.tensor([0, 2, 4, 6], dtype=torch.uint8)[:, None]                          # [4, 1]


def _fp16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """The fp16 at byte `start` of every block, as float32 [nb, 1]."""
    return blocks[:, start:start + 2].view(torch.float16).float()                               # [nb, 1]


def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    """packed [nb, g, n] uint8 -> [nb, g, 2, n]: low nibbles, then high nibbles (gguf's order)."""
    q = torch.empty(*packed.shape[:-1], 2, packed.shape[-1], dtype=torch.uint8)                  # [nb, g, 2, n]
    torch.bitwise_and(packed, 0x0F, out=q[..., 0, :])
    torch.bitwise_right_shift(packed, 4, out=q[..., 1, :])
    return q


def _crumbs(packed: torch.Tensor) -> torch.Tensor:
    """packed [nb, g, 32] uint8 -> [nb, g, 4, 32] 2-bit fields, bits 0-1 first (gguf's order)."""
    q = torch.bitwise_right_shift(packed[:, :, None, :], _CRUMB_SHIFTS)                          # [nb, g, 4, 32]
    return q.bitwise_and_(0x03)


def _bits_by_plane(packed: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """packed [nb, 32] uint8 -> [nb, 8, 32] (a strided view): entry (k, i) is table's value for bit k of byte i."""
    return table[packed.long()].transpose(1, 2)                                                  # [nb, 8, 32]


def _bits_in_order(packed: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """packed [nb, 4] uint8 (a little-endian uint32) -> [nb, 32]: table's value for bit j, j = 0..31."""
    return table[packed.long()].view(packed.shape[0], QK)                                       # [nb, 32]


def _k_scales(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12 bytes of 6-bit scales and minimums of Q4_K / Q5_K: [nb, 12] -> sc, m, each [nb, 8] uint8."""
    d, m, m_d = scales[:, 0:4], scales[:, 4:8], scales[:, 8:12]                                  # [nb, 4] each
    sc = torch.empty(len(scales), 8, dtype=torch.uint8)
    mn = torch.empty(len(scales), 8, dtype=torch.uint8)
    torch.bitwise_and(d, 0x3F, out=sc[:, :4])
    torch.bitwise_and(m, 0x3F, out=mn[:, :4])
    torch.bitwise_or(m_d & 0x0F, (d >> 2) & 0x30, out=sc[:, 4:])
    torch.bitwise_or(m_d >> 4, (m >> 2) & 0x30, out=mn[:, 4:])
    return sc, mn


def f32(blocks: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(blocks.view(torch.float32))


def f16(blocks: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(blocks.view(torch.float16))


def bf16(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """bfloat16 -> float32 is the bits shifted left by 16, as gguf does."""
    out.copy_(blocks.view(torch.bfloat16))


def q8_0(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 34]: fp16 d, 32 int8 q. value = q * d."""
    out.copy_(blocks[:, 2:].view(torch.int8)).mul_(_fp16(blocks, 0))                            # [nb, 32]


def q4_0(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 18]: fp16 d, 16 bytes of nibbles. value = d * (q - 8)."""
    q = _nibbles(blocks[:, None, 2:]).sub_(8)                                                    # [nb, 1, 2, 16]
    out.copy_(q.view(torch.int8).view(-1, QK)).mul_(_fp16(blocks, 0))                           # [nb, 32]


def q4_1(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 20]: fp16 d, fp16 m, 16 bytes of nibbles. value = d * q + m."""
    q = _nibbles(blocks[:, None, 4:])                                                            # [nb, 1, 2, 16]
    out.copy_(q.view(-1, QK)).mul_(_fp16(blocks, 0)).add_(_fp16(blocks, 2))                     # [nb, 32]


def q5_0(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 22]: fp16 d, 32 high bits, 16 bytes of low nibbles. value = d * (q - 16)."""
    q = _nibbles(blocks[:, None, 6:]).view(-1, QK)                                               # [nb, 32]
    q += _bits_in_order(blocks[:, 2:6], _HIGH_BIT_16_MINUS_16)                                   # q - 16, wrapped
    out.copy_(q.view(torch.int8)).mul_(_fp16(blocks, 0))                                         # [nb, 32]


def q5_1(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 24]: fp16 d, fp16 m, 32 high bits, 16 bytes of low nibbles. value = d * q + m."""
    q = _nibbles(blocks[:, None, 8:]).view(-1, QK)                                               # [nb, 32]
    q += _bits_in_order(blocks[:, 4:8], _HIGH_BIT_16)
    out.copy_(q).mul_(_fp16(blocks, 0)).add_(_fp16(blocks, 2))                                   # [nb, 32]


def q2_k(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 84]: 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit q, fp16 d, fp16 dmin.
    value = (d * sc) * q - dmin * m, per 16 values."""
    scales = blocks[:, :16]                                                                      # [nb, 16]
    dl = (_fp16(blocks, 80) * (scales & 0x0F))[..., None]                                        # [nb, 16, 1]
    ml = (_fp16(blocks, 82) * (scales >> 4))[..., None]                                          # [nb, 16, 1]
    q = _crumbs(blocks[:, 16:80].view(-1, 2, QK))                                                # [nb, 2, 4, 32]
    values = out.view(-1, 16, 16)                                                                # [nb, 16, 16]
    values.copy_(q.view(-1, 16, 16)).mul_(dl).sub_(ml)


def q3_k(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 110]: 32 bytes high mask, 64 bytes of 2-bit q, 12 bytes of 6-bit scales, fp16 d.
    value = (d * (sc - 32)) * (q - 4 * (1 - high bit)), per 16 values."""
    low, high = blocks[:, 96:104], blocks[:, 104:108]                                            # [nb, 8], [nb, 4]
    sc = torch.empty(len(blocks), 16, dtype=torch.uint8)
    torch.bitwise_and(low, 0x0F, out=sc[:, :8])
    torch.bitwise_right_shift(low, 4, out=sc[:, 8:])
    sc.view(-1, 4, 4).bitwise_or_(((high[:, None, :] >> _CRUMB_SHIFTS) & 0x03) << 4).sub_(32)   # [nb, 4, 4]
    dl = (_fp16(blocks, 108) * sc.view(torch.int8))[..., None]                                   # [nb, 16, 1]
    q = _crumbs(blocks[:, 32:96].view(-1, 2, QK)).view(-1, 8, QK)                               # [nb, 8, 32]
    q += _bits_by_plane(blocks[:, :32], _Q3_HIGH_MINUS_4)                                        # q - 4 + 4 h
    out.view(-1, 16, 16).copy_(q.view(torch.int8).view(-1, 16, 16)).mul_(dl)                    # [nb, 16, 16]


def q4_k(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 144]: fp16 d, fp16 dmin, 12 bytes of 6-bit scales / mins, 128 bytes of nibbles.
    value = (d * sc) * q - dmin * m, per 32 values."""
    sc, mn = _k_scales(blocks[:, 4:16])                                                          # [nb, 8] each
    ds = (_fp16(blocks, 0) * sc)[..., None]                                                      # [nb, 8, 1]
    dm = (_fp16(blocks, 2) * mn)[..., None]                                                      # [nb, 8, 1]
    q = _nibbles(blocks[:, 16:].view(-1, 4, QK))                                                 # [nb, 4, 2, 32]
    values = out.view(-1, 8, QK)                                                                 # [nb, 8, 32]
    values.copy_(q.view(-1, 8, QK)).mul_(ds).sub_(dm)


def q5_k(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 176]: fp16 d, fp16 dmin, 12 bytes of 6-bit scales / mins, 32 bytes of high bits, 128 bytes of nibbles.
    value = (d * sc) * q - dmin * m, per 32 values."""
    sc, mn = _k_scales(blocks[:, 4:16])                                                          # [nb, 8] each
    ds = (_fp16(blocks, 0) * sc)[..., None]                                                      # [nb, 8, 1]
    dm = (_fp16(blocks, 2) * mn)[..., None]                                                      # [nb, 8, 1]
    q = _nibbles(blocks[:, 48:].view(-1, 4, QK)).view(-1, 8, QK)                                # [nb, 8, 32]
    q += _bits_by_plane(blocks[:, 16:48], _HIGH_BIT_16)
    values = out.view(-1, 8, QK)                                                                 # [nb, 8, 32]
    values.copy_(q).mul_(ds).sub_(dm)


def q6_k(blocks: torch.Tensor, out: torch.Tensor) -> None:
    """[nb, 210]: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales, fp16 d.
    value = (d * sc) * (q - 32), per 16 values."""
    ds = (_fp16(blocks, 208) * blocks[:, 192:208].view(torch.int8))[..., None]                   # [nb, 16, 1]
    q = _nibbles(blocks[:, :128].view(-1, 2, 64)).view(-1, 2, 4, QK)                             # [nb, 2, 4, 32]
    high = _crumbs(blocks[:, 128:192].view(-1, 2, QK)).bitwise_left_shift_(4).sub_(32)          # [nb, 2, 4, 32]
    q += high                                                                                    # q - 32, wrapped
    out.view(-1, 16, 16).copy_(q.view(torch.int8).view(-1, 16, 16)).mul_(ds)                    # [nb, 16, 16]
