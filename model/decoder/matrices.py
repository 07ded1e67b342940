"""The weight matrices the decoder multiplies by, [out, in]: DenseMatrix (float32) or QuantizedMatrix (GGUF quants
kept in memory, 4-7x smaller, dequantized a chunk of rows at a time while multiplying). Both give x @ W^T, rows of
W (an embedding lookup) and the whole float32 W.

A QuantizedMatrix holds each block's codes repacked row by row into bit planes (model.decoder.bitplanes) and its
scales unpacked (float32 d and dmin per block, group scales and minimums one byte each): the file's bits, laid out
so that a chunk dequantizes in a few contiguous torch ops, exactly as gguf does (model.files.quants.scale_codes).
Where the native int8 kernel runs, a Q8_0 matrix holds its codes and scales once, in that kernel's groups of 16 rows
(model.native.int8_linear.Int8Matrix), which multiplies it as codes (the generation step, and x @ W^T here: a
64-token trace of a 0.5B model 1.4x faster than dequantizing), and dequantizes rows from there. Another type's
product dequantizes into this thread's reused buffers (a fresh multi-MB buffer per call or chunk costs a page fault
per 4 kB); nothing on the object changes after construction, so any number of threads may share one matrix.
"""
from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F

from model.decoder import bitplanes
from model.files.quants import dequantize, integers_to_float, quant_format, row_bytes, scale_codes
from model.native import int8_linear

CHUNK_VALUES = 1 << 18      # weights dequantized per step of a product (1 MB of float32)
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
        self.planes = [torch.empty(n_rows, n_cols * w // 8, dtype=torch.uint8) for w in bitplanes.WIDTHS[fmt.bits]]
        self.d = self.sc = self.dmin = self.mn = None                              # [out * blocks per row, 1 or groups]
        blocks = data.reshape(n_rows, -1)                                          # [out, bytes per row]
        step = max(1, CHUNK_VALUES // n_cols)
        for start in range(0, n_rows, step):
            rows = slice(start, min(start + step, n_rows))
            fields = fmt.split(torch.from_numpy(blocks[rows].copy()).view(-1, fmt.block_bytes))
            packed = bitplanes.pack(fields.codes.view(-1, n_cols), fmt.bits)
            for plane, part in zip(self.planes, packed, strict=True):
                plane[rows] = part
            for name in ("d", "sc", "dmin", "mn"):
                self._store(name, rows, getattr(fields, name))
        self.int8 = None
        if fmt.name == "Q8_0" and int8_linear.available():        # held once, in the native kernel's layout
            self.int8 = int8_linear.Int8Matrix(self.planes[0].view(torch.int8), self.d.view(n_rows, -1), None, False)
            self.planes, self.d = [], None

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

    def _grouped_rows(self, rows: slice | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Q8_0 held as the kernel's groups of 16 rows (int8_linear.grouped_layout): the int8 codes [r, in] and
        float32 scales [r, in / 32] of rows `rows` (a slice or ids)."""
        codes, scales, _ = self.int8.tensors                                       # [G, in, 16], [G, in / 32, 16]
        group = int8_linear.GROUP
        if not isinstance(rows, slice):
            return _picked(codes, rows // group, rows % group), _picked(scales, rows // group, rows % group)
        g0, g1 = rows.start // group, -(-rows.stop // group)
        pick = slice(rows.start - g0 * group, rows.stop - g0 * group)
        return (codes[g0:g1].transpose(1, 2).reshape(-1, codes.shape[1])[pick],
                scales[g0:g1].transpose(1, 2).reshape(-1, scales.shape[1])[pick])

    def _scales(self, rows: slice | torch.Tensor) -> list[torch.Tensor | None]:
        """d, sc, dmin, mn of rows `rows` (a slice or ids): [blocks, 1 or groups per block] each, or None."""
        per_row = self._shape[1] // self.format.block_values
        if isinstance(rows, slice):
            blocks = slice(rows.start * per_row, rows.stop * per_row)
            return [None if t is None else t[blocks] for t in (self.d, self.sc, self.dmin, self.mn)]
        return [None if t is None else _picked(t.view(self._shape[0], per_row, -1), rows).view(-1, t.shape[1])
                for t in (self.d, self.sc, self.dmin, self.mn)]

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """x [..., in] @ W^T (+ bias) -> [..., out]: a Q8_0 matrix in the int8 kernel's layout multiplied as codes;
        else dequantizing CHUNK_VALUES weights at a time into this thread's buffer. Several rows of x are multiplied as
        W_chunk @ x^T into [out, T], transposed once at the end: MKL is up to 20% slower on x @ W_chunk^T when a chunk
        has few rows (ffn_down's 4864-wide rows: 215 a chunk)."""
        n_rows, n_cols = self._shape
        if self.int8 is not None:                     # Q8_0 in the kernel's layout: multiplied as codes, no copy made
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
            codes, scales = self._grouped_rows(ids)                                 # [r, in], [r, in / 32]
            return (codes.float().view(len(ids), -1, 32) * scales[..., None]).view(len(ids), -1)
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
        if self.int8 is not None:
            int8_linear.dequantize_grouped_rows(self.int8, rows, out)              # one native pass, same values
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
    if fmt.name == "Q8_0" and int8_linear.available():
        return int8_linear.grouped_nbytes(int(shape[0]), int(shape[1]), nibbles=False, offsets=False)
    fields = fmt.split(torch.zeros(1, fmt.block_bytes, dtype=torch.uint8))
    per_block = sum(t.nbytes for t in (fields.d, fields.sc, fields.dmin, fields.mn) if t is not None)
    return n_values * fmt.bits // 8 + n_values // fmt.block_values * per_block


def matrix_from_gguf(raw: np.ndarray, type_name: str, shape: tuple[int, int], keep_quantized: bool):
    """A QuantizedMatrix of a tensor's raw GGUF data when keep_quantized (F32 stays dense: nothing to save), else a
    DenseMatrix of its float32 values."""
    if keep_quantized and type_name != "F32":
        return QuantizedMatrix(raw, type_name, shape)
    return DenseMatrix(torch.from_numpy(dequantize(raw, type_name, (int(shape[0]), int(shape[1])))))


def _thread_buffer(name: str, n: int, dtype: torch.dtype) -> torch.Tensor:
    """This thread's buffer `name`, its first n elements (grown as needed, kept for the thread's next product)."""
    buffers = _buffers.__dict__.setdefault("by_name", {})
    buffer = buffers.get(name)
    if buffer is None or buffer.numel() < n:
        with torch.inference_mode(False):   # a normal tensor: written in place later, in inference mode or not
            buffer = buffers[name] = torch.empty(n, dtype=dtype)
    return buffer[:n]


def _picked(table: torch.Tensor, rows: torch.Tensor, lanes: torch.Tensor | None = None) -> torch.Tensor:
    """table[rows] (or table[rows, :, lanes]) as a new tensor, gathered by numpy: torch's indexing of a few rows of a
    large table starts its OpenMP team, whose threads then spin for ms after every call, against the generation
    step's kernels on the same cores (a 10-row step 36 -> 31 ms)."""
    bf16 = table.dtype == torch.bfloat16                      # numpy has no bfloat16: its bits are picked
    index = (rows.numpy(),) if lanes is None else (rows.numpy(), slice(None), lanes.numpy())
    picked = torch.from_numpy((table.view(torch.int16) if bf16 else table).numpy()[index])
    return picked.view(torch.bfloat16) if bf16 else picked
