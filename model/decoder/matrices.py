"""The weight matrices the decoder multiplies by, [out, in]: DenseMatrix (float32) or QuantizedMatrix (GGUF quants
kept in memory, 4-7x smaller, dequantized a chunk of rows at a time while multiplying). Both give x @ W^T, rows of
W (an embedding lookup) and the whole float32 W.

A QuantizedMatrix holds each block's codes repacked row by row into bit planes (model.decoder.bitplanes) and its
scales unpacked (float32 d and dmin per block, group scales and minimums one byte each): the file's bits, laid out
so that a chunk dequantizes in a few contiguous torch ops, exactly as gguf does (model.files.quants.scale_codes).
Where the native int8 kernel runs, a matrix whose every 32 values are code * scale (+ offset) (KERNEL_TYPES: Q8_0,
Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K) holds its codes, scales and offsets once, in that kernel's groups of 16 rows
(model.native.int8_linear.Int8Matrix), which multiplies it as codes (the generation step, and x @ W^T here: a
64-token trace of a 0.5B model 1.4x faster than dequantizing) and whose made weights fma(code, scale, offset) are
gguf's values exactly (code * scale is exact for float16 scales; one rounding either way). 4-bit codes with offsets
stay two to a byte; 5-bit ones take a byte (Q5_0's 5.5 bits a weight in the file become 9: the price of the kernel).
Another type's product dequantizes into this thread's reused buffers (a fresh multi-MB buffer per call or chunk
costs a page fault per 4 kB); nothing on the object changes after construction, so any number of threads may share
one matrix.
"""
from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F

from model.decoder import bitplanes
from model.files.quants import QuantFormat, dequantize, integers_to_float, quant_format, row_bytes, scale_codes
from model.native import int8_linear

CHUNK_VALUES = 1 << 18      # weights dequantized per step of a product (1 MB of float32)
KERNEL_TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K")   # held as Int8Matrix where the kernel runs
_buffers = threading.local()


class DenseMatrix:
    """A float32 matrix [out, in]."""

    def __init__(self, weight: torch.Tensor):
        self.weight = weight                                                       # [out, in]

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.weight.shape)

    @property
    def nbytes(self) -> int:
        return self.weight.nbytes

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x [T, in] or [in] @ W^T (+ bias) -> [T, out] or [out]."""
        return F.linear(x, self.weight, bias)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """W[ids] [T, in], picked by numpy (see _picked)."""
        return _picked(self.weight, ids)                                           # [T, in]

    def dequantized(self) -> torch.Tensor:
        return self.weight


class QuantizedMatrix:
    """A matrix [out, in] kept quantized; raw is uint8 [out, bytes per row] of type_name's GGUF blocks (or the
    values of a float type)."""

    def __init__(self, raw: np.ndarray, type_name: str, shape: tuple[int, int]):
        fmt = quant_format(type_name)
        n_rows, n_cols = int(shape[0]), int(shape[1])
        data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
        if len(data) != n_rows * row_bytes(type_name, n_cols):
            raise ValueError(f"{len(data)} bytes of {type_name} do not hold a [{n_rows}, {n_cols}] matrix")
        self.format, self._shape = fmt, (n_rows, n_cols)
        if fmt.dtype is not None:
            values = data.view(np.int16 if fmt.block_bytes == 2 else np.float32).reshape(n_rows, n_cols)
            self.planes = [torch.from_numpy(values.copy()).view(fmt.dtype)]        # [out, in]
            self.d = self.sc = self.dmin = self.mn = self.int8 = None
            return
        self.d = self.sc = self.dmin = self.mn = self.int8 = None                  # [out * blocks per row, 1 or groups]
        blocks = data.reshape(n_rows, -1)                                          # [out, bytes per row]
        if fmt.name in KERNEL_TYPES and int8_linear.available():
            self.planes, self.int8 = [], _kernel_matrix(fmt, blocks, n_rows, n_cols)
            return
        self.planes = [torch.empty(n_rows, n_cols * w // 8, dtype=torch.uint8) for w in bitplanes.WIDTHS[fmt.bits]]
        for rows, fields in _split_rows(fmt, blocks, n_rows, n_cols):
            packed = bitplanes.pack(fields.codes.view(-1, n_cols), fmt.bits)
            for plane, part in zip(self.planes, packed, strict=True):
                plane[rows] = part
            for name in ("d", "sc", "dmin", "mn"):
                self._store(name, rows, getattr(fields, name))

    def _store(self, name: str, rows: slice, part: torch.Tensor | None) -> None:
        """The blocks of rows `rows` of scale field `name` (allocated on the first chunk): [blocks, per block]."""
        if part is None:
            return
        per_row = self._shape[1] // self.format.block_values
        if getattr(self, name) is None:
            setattr(self, name, torch.empty(self._shape[0] * per_row, part.shape[1], dtype=part.dtype))
        getattr(self, name)[rows.start * per_row:rows.stop * per_row] = part

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (*self.planes, self.d, self.sc, self.dmin, self.mn) if t is not None) + (
            self.int8.nbytes if self.int8 is not None else 0)

    @property
    def values(self) -> torch.Tensor:
        """Q8_0: the int8 quants [out, in / 32, 32]; each 32 are scaled by `scale`."""
        if self.int8 is not None:
            return self._grouped_rows(slice(0, self._shape[0]))[0].view(self._shape[0], -1, 32)
        return self.planes[0].view(torch.int8).view(self._shape[0], -1, 32)

    @property
    def scale(self) -> torch.Tensor:
        """Q8_0: the float32 scale of every 32 quants [out, in / 32, 1]."""
        if self.int8 is not None:
            return self._grouped_rows(slice(0, self._shape[0]))[1].view(self._shape[0], -1, 1)
        return self.d.view(self._shape[0], -1, 1)

    def _grouped_rows(self, rows: slice | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """A matrix held as the kernel's groups of 16 rows (int8_linear.grouped_layout): the codes [r, in] (int8, or
        uint8 0..15 for 4-bit codes), float32 scales [r, in / 32] and offsets (or None) of rows `rows` (a slice or
        ids)."""
        codes, scales, offsets = self.int8.tensors              # [G, in, 16] or [G, in, 8]; [G, in / 32, 16] each
        group = int8_linear.GROUP
        if not isinstance(rows, slice):
            g, lane = rows // group, rows % group
            if self.int8.nibbles:                               # byte j: lane j's code low, lane j + 8's high
                shift = torch.where(lane >= group // 2, 4, 0).to(torch.uint8)[:, None]          # [r, 1]
                picked_codes = (_picked(codes, g, lane % (group // 2)) >> shift) & 0x0F          # [r, in]
            else:
                picked_codes = _picked(codes, g, lane)                                           # [r, in]
            return picked_codes, _picked(scales, g, lane), None if offsets is None else _picked(offsets, g, lane)
        g0, g1 = rows.start // group, -(-rows.stop // group)
        pick = slice(rows.start - g0 * group, rows.stop - g0 * group)
        part = codes[g0:g1]
        if self.int8.nibbles:
            part = torch.cat([part & 0x0F, part >> 4], dim=2)                                   # [g, in, 16]

        def by_row(t: torch.Tensor) -> torch.Tensor:
            return t.transpose(1, 2).reshape(-1, t.shape[1])[pick]                               # [r, width]
        return by_row(part), by_row(scales[g0:g1]), None if offsets is None else by_row(offsets[g0:g1])

    def _grouped_values(self, rows: slice | torch.Tensor) -> torch.Tensor:
        """Rows `rows` of a matrix held in the kernel's layout, float32 [r, in]: code * scale (+ offset), two
        roundings at most where the kernel's made weights take one, the same values (code * scale is exact)."""
        codes, scales, offsets = self._grouped_rows(rows)
        values = codes.float().view(len(codes), -1, int8_linear.BLOCK).mul_(scales[..., None])   # [r, in / 32, 32]
        if offsets is not None:
            values.add_(offsets[..., None])
        return values.view(len(codes), -1)

    def _scales(self, rows: slice | torch.Tensor) -> list[torch.Tensor | None]:
        """d, sc, dmin, mn of rows `rows` (a slice or ids): [blocks, 1 or groups per block] each, or None."""
        per_row = self._shape[1] // self.format.block_values
        if isinstance(rows, slice):
            blocks = slice(rows.start * per_row, rows.stop * per_row)
            return [None if t is None else t[blocks] for t in (self.d, self.sc, self.dmin, self.mn)]
        return [None if t is None else _picked(t.view(self._shape[0], per_row, -1), rows).view(-1, t.shape[1])
                for t in (self.d, self.sc, self.dmin, self.mn)]

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x [..., in] @ W^T (+ bias) -> [..., out]: a matrix in the int8 kernel's layout multiplied as codes; else
        dequantizing CHUNK_VALUES weights at a time into this thread's buffer. Several rows of x are multiplied as
        W_chunk @ x^T into [out, T], transposed once at the end: MKL is up to 20% slower on x @ W_chunk^T when a chunk
        has few rows (ffn_down's 4864-wide rows: 215 a chunk)."""
        n_rows, n_cols = self._shape
        if self.int8 is not None:                     # in the kernel's layout: multiplied as codes, no copy made
            out = torch.from_numpy(self.int8(x.reshape(-1, n_cols).numpy(), made=True))   # [T, out]
            return (out if bias is None else out.add_(bias)).view(*x.shape[:-1], n_rows)
        step = max(1, min(n_rows, CHUNK_VALUES // n_cols))
        flat_x = x if x.dim() == 1 else x.reshape(-1, n_cols)                      # [in] or [T, in]
        out_t = torch.empty(n_rows, *flat_x.shape[:-1])                            # [out] or [out, T]
        weights = _thread_buffer("weights", step * n_cols, torch.float32)
        for start in range(0, n_rows, step):
            rows = slice(start, min(start + step, n_rows))
            w = weights[:(rows.stop - start) * n_cols].view(-1, n_cols)            # [chunk, in]
            self.dequantize_rows(rows, w)
            if x.dim() == 1:
                torch.mv(w, flat_x, out=out_t[rows])                               # [chunk]
            else:
                torch.mm(w, flat_x.T, out=out_t[rows])                             # [chunk, T]
        out = out_t if x.dim() == 1 else torch.empty(out_t.shape[::-1]).copy_(out_t.T)  # [T, out]
        if bias is not None:
            out += bias
        return out.view(*x.shape[:-1], n_rows)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """W[ids] as float32 [len(ids), in]."""
        if self.int8 is not None:
            return self._grouped_values(ids)                                        # [r, in]
        picked = QuantizedMatrix.__new__(QuantizedMatrix)
        picked.format, picked._shape = self.format, (len(ids), self._shape[1])
        picked.planes = [_picked(plane, ids) for plane in self.planes]
        picked.d, picked.sc, picked.dmin, picked.mn = self._scales(ids)
        picked.int8 = None
        return picked.dequantized()

    def dequantized(self) -> torch.Tensor:
        """The whole matrix as float32 [out, in] (allocates it)."""
        n_rows, n_cols = self._shape
        out = torch.empty(n_rows, n_cols)
        step = max(1, CHUNK_VALUES // n_cols)
        for start in range(0, n_rows, step):
            rows = slice(start, min(start + step, n_rows))
            self.dequantize_rows(rows, out[rows])
        return out

    def dequantize_rows(self, rows: slice, out: torch.Tensor) -> None:
        """Rows start:stop of the matrix into out, float32 [stop - start, in] (contiguous)."""
        fmt = self.format
        if self.int8 is not None and not (self.int8.nibbles or self.int8.has_offsets):
            int8_linear.dequantize_grouped_rows(self.int8, rows, out)              # one native pass, same values
            return
        if self.int8 is not None:
            out.copy_(self._grouped_values(rows))
            return
        planes = [plane[rows] for plane in self.planes]
        if fmt.dtype is not None:
            out.copy_(planes[0])
            return
        n = out.numel()
        if fmt.name == "Q8_0" and int8_linear.dequantize_q8_0(planes[0], self._scales(rows)[0], out):
            return                                                                 # one native pass, same values
        if fmt.bits == 8:
            integers = planes[0]                                                   # [r, in]: Q8_0 has no offset
        else:
            integers = _thread_buffer("codes", n, torch.uint8).view(out.shape)     # [r, in]
            bitplanes.unpack(planes, fmt.bits, integers, _thread_buffer("unpack", 2 * n, torch.uint8), fmt.offset)
        integers_to_float(fmt, integers, out)
        scale_codes(fmt, out.view(-1, fmt.block_values), *self._scales(rows),
                    scratch=_thread_buffer("scales", 2 * n // fmt.group, torch.float32))


def quantized_nbytes(type_name: str, shape: tuple[int, int]) -> int:
    """Bytes a QuantizedMatrix of this GGUF type and shape [out, in] holds: its codes' bit planes and each block's
    unpacked scale fields (read off one block split by the format)."""
    fmt = quant_format(type_name)
    n_values = int(shape[0]) * int(shape[1])
    if fmt.dtype is not None:
        return n_values * fmt.block_bytes
    if fmt.name in KERNEL_TYPES and int8_linear.available():
        nibbles, offsets = _kernel_layout(fmt)
        return int8_linear.grouped_nbytes(int(shape[0]), int(shape[1]), nibbles, offsets)
    fields = fmt.split(torch.zeros(1, fmt.block_bytes, dtype=torch.uint8))
    per_block = sum(t.nbytes for t in (fields.d, fields.sc, fields.dmin, fields.mn) if t is not None)
    return n_values * fmt.bits // 8 + n_values // fmt.block_values * per_block


def _kernel_layout(fmt: QuantFormat) -> tuple[bool, bool]:
    """How a KERNEL_TYPES format is held: (4-bit codes two to a byte, with offsets). Q4_1 / Q5_1 add m, Q4_K / Q5_K
    subtract dmin * mn, Q4_0's codes 0..15 take the offset -8 d (exact: d (q - 8) is a float32 value; where gguf's
    zero is -0, a negative d's, it is +0); Q5_0's codes are held as int8 q - 16, Q8_0's as they are."""
    nibbles = fmt.bits == 4
    return nibbles, nibbles or fmt.offset == 0 and fmt.bits != 8


def _split_rows(fmt: QuantFormat, blocks: np.ndarray, n_rows: int, n_cols: int):
    """(rows, Fields) of the matrix's blocks, CHUNK_VALUES values at a time."""
    step = max(1, CHUNK_VALUES // n_cols)
    for start in range(0, n_rows, step):
        rows = slice(start, min(start + step, n_rows))
        yield rows, fmt.split(torch.from_numpy(blocks[rows].copy()).view(-1, fmt.block_bytes))


def _kernel_matrix(fmt: QuantFormat, blocks: np.ndarray, n_rows: int, n_cols: int) -> int8_linear.Int8Matrix:
    """A KERNEL_TYPES matrix's blocks as the native kernel's Int8Matrix: the file's codes, and per 32 values the
    scale d (or d * sc) and offset m (or -dmin * mn), each the float32 product gguf computes."""
    nibbles, with_offsets = _kernel_layout(fmt)
    per_row = n_cols // int8_linear.BLOCK
    codes = torch.empty(n_rows, n_cols // 2, dtype=torch.uint8) if nibbles else \
        torch.empty(n_rows, n_cols, dtype=torch.int8)                              # [out, in / 2] or [out, in]
    scales = torch.empty(n_rows, per_row)                                          # [out, in / 32]
    offsets = torch.empty(n_rows, per_row) if with_offsets else None               # [out, in / 32]
    for rows, fields in _split_rows(fmt, blocks, n_rows, n_cols):
        n_blocks = (rows.stop - rows.start) * per_row
        row_codes = fields.codes.view(n_blocks, int8_linear.BLOCK)                 # [b, 32] uint8
        if nibbles:
            codes[rows] = int8_linear.nibble_bytes(row_codes).view(-1, n_cols // 2)
        else:
            signed = row_codes.view(torch.int8) if fmt.bits == 8 else (row_codes.to(torch.int8) + fmt.offset)
            codes[rows] = signed.view(-1, n_cols)                                  # Q5_0: code - 16
        d = fields.d if fields.sc is None else fields.sc.float().mul_(fields.d)      # [chunk blocks, groups]
        scales[rows] = d.expand(-1, fmt.block_values // int8_linear.BLOCK).reshape(-1, per_row)
        if offsets is not None:
            if fields.mn is not None:
                m = fields.mn.float().mul_(fields.dmin).neg_()                     # K-quants: - dmin * mn
            else:
                m = fields.d * fmt.offset if fields.dmin is None else fields.dmin  # Q4_0: -8 d; Q4_1 / Q5_1: m
            offsets[rows] = m.expand(-1, fmt.block_values // int8_linear.BLOCK).reshape(-1, per_row)
    return int8_linear.Int8Matrix(codes, scales, offsets, nibbles)


def matrix_from_gguf(raw: np.ndarray, type_name: str, shape: tuple[int, int], keep_quantized: bool):
    """A QuantizedMatrix of a tensor's raw GGUF data when keep_quantized (F32 stays dense: nothing to save), else a
    DenseMatrix of its float32 values."""
    if keep_quantized and type_name != "F32":
        return QuantizedMatrix(raw, type_name, shape)
    return DenseMatrix(torch.from_numpy(dequantize(raw, type_name, (int(shape[0]), int(shape[1])))))


def _thread_buffer(name: str, n: int, dtype: torch.dtype) -> torch.Tensor:
    """This thread's buffer `name`, its first n elements (grown as needed, kept for the thread's next product). Kept
    as a numpy array: a torch tensor freed with the thread's locals releases the GIL, and a daemon thread (the
    generation batch) ending while the interpreter exits is then stopped in torch's C++ and aborts the process
    ("terminate called without an active exception")."""
    buffers = _buffers.__dict__.setdefault("by_name", {})
    buffer = buffers.get(name)
    if buffer is None or buffer.size < n:
        buffer = buffers[name] = np.empty(n, _NUMPY_TYPES[dtype])
    with torch.inference_mode(False):       # a normal tensor: written in place later, in inference mode or not
        return torch.from_numpy(buffer[:n])


_NUMPY_TYPES = {torch.float32: np.float32, torch.uint8: np.uint8}


def _picked(table: torch.Tensor, rows: torch.Tensor, lanes: torch.Tensor | None = None) -> torch.Tensor:
    """table[rows] (or table[rows, :, lanes]) as a new tensor, gathered by numpy: torch's indexing of a few rows of a
    large table starts its OpenMP team, whose threads then spin for ms after every call, against the generation
    step's kernels on the same cores (a 10-row step 36 -> 31 ms)."""
    bf16 = table.dtype == torch.bfloat16                      # numpy has no bfloat16: its bits are picked
    index = (rows.numpy(),) if lanes is None else (rows.numpy(), slice(None), lanes.numpy())
    picked = torch.from_numpy((table.view(torch.int16) if bf16 else table).numpy()[index])
    return picked.view(torch.bfloat16) if bf16 else picked
