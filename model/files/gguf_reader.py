"""A GGUF's header, metadata and tensor table, read over a read-only memory map within limits.

Every metadata value is one ndarray over the mapped bytes: a number array (or a number) a view of them, a string a
uint8 view, a string array a StringArray (one int64 array of its records' offsets, made in one pass that keeps no
Python object per item). Limits that every real model passes bound what a file may declare: the number of keys and
tensors, a name's bytes, each key's items, string bytes and total bytes (LIMITS; the largest real vocabularies have
~262k tokens, merge lists ~450k), a tensor's dimensions; arrays of arrays are refused. A count or size that runs
past the end of the file is refused before anything is allocated for it. So reading any file's metadata takes
memory of at most about its size, and time bounded by the limits.

OverLimit (a limit passed) and PastEnd (data declared beyond the file's end) say what in a sentence fragment that
follows the file's name; any other damage is a ValueError. Fields keep the gguf package's reading interface
(`contents()`, `types`, `offset`, `len(field.data)`); tensors are the gguf package's ReaderTensor.
"""
from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from gguf.gguf_reader import ReaderField, ReaderTensor
from gguf.quants import quant_shape_to_byte_shape

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_KEYS = 1 << 13               # real models have fewer than a hundred metadata keys
MAX_TENSORS = 1 << 14            # Llama 3.1 405B has 1,138 tensors; unfused MoE experts ~13k
MAX_NAME_BYTES = 1 << 10         # a key's or a tensor's name (llama.cpp's tensor names have at most 64)
MAX_DIMS = 4                     # GGML_MAX_DIMS
CHUNK = 1 << 16                  # strings made into bytes a chunk of records at a time
NUMBERS = {GGUFValueType.UINT8: np.uint8, GGUFValueType.INT8: np.int8, GGUFValueType.UINT16: np.uint16,
           GGUFValueType.INT16: np.int16, GGUFValueType.UINT32: np.uint32, GGUFValueType.INT32: np.int32,
           GGUFValueType.FLOAT32: np.float32, GGUFValueType.UINT64: np.uint64, GGUFValueType.INT64: np.int64,
           GGUFValueType.FLOAT64: np.float64, GGUFValueType.BOOL: np.bool_}
PLAIN_TENSORS = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
                 "I32": np.int32, "I64": np.int64}     # tensor types read as their values; others as bytes
HEADER = (("GGUF.version", 4, GGUFValueType.UINT32, 4), ("GGUF.tensor_count", 8, GGUFValueType.UINT64, 8),
          ("GGUF.kv_count", 16, GGUFValueType.UINT64, 8))      # fields the gguf package makes of the header
SMALLEST_KEY = 8 + 4 + 1         # bytes of a key-value record: name length, type, a one-byte value
SMALLEST_TENSOR = 8 + 4 + 4 + 8  # bytes of a tensor record: name length, n_dims, type, offset


@dataclass(frozen=True)
class Limit:
    """What one metadata key may hold: items (of an array; a scalar is one), bytes of one string, bytes in all."""

    items: int
    item_bytes: int
    total_bytes: int
    why: str = ""


VOCABULARY = Limit(1 << 19, 1 << 16, 32 << 20, "the largest real vocabularies have ~262k tokens")
LIMITS = {
    "tokenizer.ggml.tokens": VOCABULARY,
    "tokenizer.ggml.token_type": VOCABULARY,
    "tokenizer.ggml.scores": VOCABULARY,
    "tokenizer.ggml.merges": Limit(1 << 20, 1 << 16, 64 << 20, "the longest real merge lists have ~450k merges"),
}
NUMBER_ARRAY = Limit(1 << 20, 0, 16 << 20, "no model this app reads has a longer one")
STRING_ARRAY = Limit(1 << 16, 1 << 20, 16 << 20, "no model this app reads has a longer one")
STRING = Limit(1, 1 << 20, 1 << 20, "chat templates, the longest real strings, have tens of KB")


def limit_of(key: str, item_type: GGUFValueType, is_array: bool) -> Limit:
    """The limit a key's value is read within."""
    if key in LIMITS:
        return LIMITS[key]
    if not is_array:
        return STRING
    return STRING_ARRAY if item_type == GGUFValueType.STRING else NUMBER_ARRAY


class PastEnd(ValueError):
    """The file declares data (metadata or a tensor) beyond its last byte."""


class OverLimit(ValueError):
    """The file declares more than any real model has (a limit of this module)."""


class StringArray(Sequence):
    """A GGUF string array over the mapped bytes: item i is data[bounds[i] + 8:bounds[i + 1]], as bytes (each
    record is its 8-byte length, then its bytes)."""

    def __init__(self, data: np.ndarray, bounds: np.ndarray) -> None:
        self._data = data
        self.bounds = bounds                     # [n + 1] int64: each record's offset in the file, then the end

    def __len__(self) -> int:
        return len(self.bounds) - 1

    @property
    def nbytes(self) -> int:
        """Bytes of the strings (without their lengths)."""
        return int(self.bounds[-1] - self.bounds[0]) - 8 * len(self)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]
        return self._data[int(self.bounds[i]) + 8:int(self.bounds[i + 1])].tobytes()

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self), CHUNK):
            offsets = self.bounds[start:start + CHUNK + 1]
            base = int(offsets[0])
            chunk = self._data[base:int(offsets[-1])].tobytes()
            ends = (offsets - base).tolist()
            for a, b in zip(ends, ends[1:], strict=False):
                yield chunk[a + 8:b]


@dataclass(frozen=True, eq=False)
class Field:
    """One metadata key. value: a number's 1-item array, a number array's ndarray, a string's uint8 array or a
    string array's StringArray, all over the mapped bytes. types as the gguf package gives them ([ARRAY, item type]
    for an array)."""

    offset: int
    name: str
    types: list[GGUFValueType]
    value: np.ndarray | StringArray

    @property
    def is_array(self) -> bool:
        return self.types[0] == GGUFValueType.ARRAY

    @property
    def count(self) -> int:
        """Items of an array; 1 for a scalar."""
        return len(self.value) if self.is_array else 1

    @property
    def data(self) -> range:
        """The items' indexes, as the gguf package's field.data (len(field.data) is the array's length)."""
        return range(self.count)

    def contents(self, index_or_slice: int | slice = slice(None)):
        """The value as Python objects, as the gguf package's ReaderField.contents: a str, a number, or an array's
        items (one of them for an int index, a list for a slice)."""
        if not self.is_array:
            return self.value.tobytes().decode() if self.types[0] == GGUFValueType.STRING else self.value[0].item()
        if self.types[-1] == GGUFValueType.STRING:
            picked = self.value[index_or_slice]
            return picked.decode() if isinstance(picked, bytes) else [item.decode() for item in picked]
        return self.value[index_or_slice].tolist()

    def summary(self) -> str:
        """The value for a message: a short scalar as itself, an array or a long string by its size."""
        if self.is_array:
            return f"[{self.count:,} {self.types[-1].name} values]"
        if self.types[0] == GGUFValueType.STRING and len(self.value) > 80:
            return f"<a string of {len(self.value):,} bytes>"
        return repr(self.contents())


class BoundedReader:
    """A GGUF's fields (key -> Field, in file order) and tensors (gguf's ReaderTensor: views of the mapped data),
    read within this module's limits. byte_order: 'I' as this machine, 'S' swapped."""

    def __init__(self, path: str | Path) -> None:
        self.data = np.memmap(path, mode="r").view(np.ndarray)      # [file bytes] uint8, read-only
        self._size = len(self.data)
        self._buffer = memoryview(self.data)
        if self.data[:4].tobytes() != MAGIC:
            raise ValueError("GGUF magic invalid")
        little = int.from_bytes(self.data[4:8].tobytes(), "little") & 0xFFFF != 0
        order = "<" if little else ">"
        self.byte_order = "I" if (sys.byteorder == "little") == little else "S"
        self._u32 = struct.Struct(order + "I")
        self._u64 = struct.Struct(order + "Q")
        version = self._read(self._u32, 4)
        if version not in VERSIONS:
            raise ValueError(f"it is GGUF version {version}; this app reads versions {VERSIONS}")
        self.tensors: list[ReaderTensor] = []
        self.fields = {name: Field(at, name, [kind], self.data[at:at + width].view(self._dtype(NUMBERS[kind])))
                       for name, at, kind, width in HEADER}
        tensor_count, key_count = self._read(self._u64, 8), self._read(self._u64, 16)
        offs = self._read_fields(24, self._count(key_count, MAX_KEYS, SMALLEST_KEY, 24, "metadata keys"))
        offs, records = self._read_tensor_records(offs, self._count(tensor_count, MAX_TENSORS, SMALLEST_TENSOR, offs,
                                                                    "tensors"))
        self.alignment = self._alignment()
        self.data_offset = offs + (-offs) % self.alignment
        self.tensors = [self._tensor(*record) for record in records]

    def _dtype(self, kind) -> np.dtype:
        return np.dtype(kind).newbyteorder(self.byte_order)

    def _read(self, unpacker: struct.Struct, offs: int) -> int:
        try:
            return unpacker.unpack_from(self._buffer, offs)[0]
        except struct.error:
            raise PastEnd(f"it declares data at byte {offs:,}, past its end ({self._size:,} bytes)") from None

    def _count(self, count: int, most: int, smallest: int, offs: int, what: str) -> int:
        """count, unless the rest of the file cannot hold that many records of at least smallest bytes (PastEnd)
        or it is more than most (OverLimit)."""
        if offs + count * smallest > self._size:
            raise PastEnd(f"it declares {count:,} {what}, more than its {self._size:,} bytes can hold")
        if count > most:
            raise OverLimit(f"declares {count:,} {what}; this app reads at most {most:,} (no real model has more)")
        return count

    def _end(self, offs: int, nbytes: int, what: str) -> int:
        """offs + nbytes, or PastEnd when that is past the file's end."""
        if offs + nbytes > self._size:
            raise PastEnd(f"it declares {nbytes:,} bytes of {what} at byte {offs:,}, past its end "
                          f"({self._size:,} bytes)")
        return offs + nbytes

    def _name(self, offs: int, what: str) -> tuple[str, int]:
        length = self._read(self._u64, offs)
        if length > MAX_NAME_BYTES:
            raise OverLimit(f"declares a {what} name of {length:,} bytes; this app reads names of at most "
                            f"{MAX_NAME_BYTES:,} bytes")
        end = self._end(offs + 8, length, f"a {what} name")
        return self.data[offs + 8:end].tobytes().decode(), end

    def _value_type(self, offs: int, key: str) -> GGUFValueType:
        raw = self._read(self._u32, offs)
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise ValueError(f"{key} has an unknown value type {raw}") from None

    def _read_fields(self, offs: int, count: int) -> int:
        for _ in range(count):
            start = offs
            key, offs = self._name(offs, "metadata key")
            kind = self._value_type(offs, key)
            offs += 4
            if kind == GGUFValueType.ARRAY:
                item = self._value_type(offs, key)
                n = self._read(self._u64, offs + 4)
                offs += 12
                if item == GGUFValueType.ARRAY:
                    raise OverLimit(f"declares {key} as an array of arrays; no model this app reads has one")
                types = [kind, item]
                value, offs = self._array(key, item, n, offs, limit_of(key, item, True))
            elif kind == GGUFValueType.STRING:
                types = [kind]
                value, offs = self._string(key, offs)
            else:
                types = [kind]
                value, offs = self._numbers(key, kind, 1, offs, NUMBER_ARRAY)
            if key in self.fields:
                raise ValueError(f"it declares the key {key} twice")
            self.fields[key] = Field(start, key, types, value)
        return offs

    def _array(self, key: str, item: GGUFValueType, n: int, offs: int, limit: Limit):
        smallest = 8 if item == GGUFValueType.STRING else np.dtype(NUMBERS[item]).itemsize
        self._end(offs, n * smallest, key)
        if n > limit.items:
            raise OverLimit(f"declares {key} with {n:,} items; this app reads at most {limit.items:,} there "
                            f"({limit.why})")
        if item == GGUFValueType.STRING:
            return self._strings(key, n, offs, limit)
        return self._numbers(key, item, n, offs, limit)

    def _numbers(self, key: str, kind: GGUFValueType, n: int, offs: int, limit: Limit) -> tuple[np.ndarray, int]:
        dtype = self._dtype(NUMBERS[kind])
        nbytes = n * dtype.itemsize
        if nbytes > limit.total_bytes:
            raise OverLimit(f"declares {key} with {nbytes:,} bytes; this app reads at most {limit.total_bytes:,} "
                            f"there ({limit.why})")
        end = self._end(offs, nbytes, key)
        return self.data[offs:end].view(dtype), end

    def _string(self, key: str, offs: int) -> tuple[np.ndarray, int]:
        length = self._read(self._u64, offs)
        limit = limit_of(key, GGUFValueType.STRING, False)
        if length > limit.item_bytes:
            raise OverLimit(f"declares {key} as a string of {length:,} bytes; this app reads at most "
                            f"{limit.item_bytes:,} there ({limit.why})")
        end = self._end(offs + 8, length, key)
        return self.data[offs + 8:end], end

    def _strings(self, key: str, n: int, offs: int, limit: Limit) -> tuple[StringArray, int]:
        """n strings from offs: one pass over their lengths writing each record's offset into one int64 array."""
        bounds = array("q", bytes(8 * (n + 1)))
        unpack, buffer, longest = self._u64.unpack_from, self._buffer, limit.item_bytes
        try:
            for i in range(n):
                bounds[i] = offs
                (length,) = unpack(buffer, offs)
                if length > longest:
                    raise OverLimit(f"declares an item of {key} of {length:,} bytes; this app reads at most "
                                    f"{longest:,} there ({limit.why})")
                offs += 8 + length
        except struct.error:
            raise PastEnd(f"it declares {key}'s strings past its end ({self._size:,} bytes)") from None
        self._end(offs, 0, key)
        bounds[n] = offs
        strings = StringArray(self.data, np.frombuffer(bounds, np.int64))
        if strings.nbytes > limit.total_bytes:
            raise OverLimit(f"declares {key} with {strings.nbytes:,} bytes of strings; this app reads at most "
                            f"{limit.total_bytes:,} there ({limit.why})")
        return strings, offs

    def _read_tensor_records(self, offs: int, count: int) -> tuple[int, list[tuple]]:
        records, names = [], set()
        for _ in range(count):
            start = offs
            name, offs = self._name(offs, "tensor")
            if name in names:
                raise ValueError(f"it declares the tensor {name} twice")
            names.add(name)
            n_dims = self._read(self._u32, offs)
            if n_dims > MAX_DIMS:
                raise OverLimit(f"declares the tensor {name} with {n_dims:,} dimensions; GGUF allows at most "
                                f"{MAX_DIMS}")
            end = self._end(offs + 4, 8 * n_dims, f"{name}'s shape")
            dims = self.data[offs + 4:end].view(self._dtype(np.uint64))
            records.append((start, name, dims, self._read(self._u32, end), self._read(self._u64, end + 4)))
            offs = end + 12
        return offs, records

    def _alignment(self) -> int:
        field = self.fields.get("general.alignment")
        if field is None:
            return DEFAULT_ALIGNMENT
        if field.types != [GGUFValueType.UINT32]:
            raise ValueError("its general.alignment is not a UINT32")
        alignment = int(field.value[0])
        if alignment == 0 or alignment & (alignment - 1):
            raise ValueError(f"its general.alignment {alignment} is not a power of two")
        return alignment

    def _tensor(self, start: int, name: str, dims: np.ndarray, raw_type: int, offset: int) -> ReaderTensor:
        kind = GGMLQuantizationType(raw_type)           # a ValueError naming GGMLQuantizationType when unknown
        n_elements = math.prod(int(d) for d in dims)
        block, type_size = GGML_QUANT_SIZES[kind]
        n_bytes = n_elements * type_size // block
        shape = tuple(int(d) for d in reversed(dims))
        if kind.name in PLAIN_TENSORS:
            dtype = self._dtype(PLAIN_TENSORS[kind.name])
        else:
            dtype, shape = np.dtype(np.uint8), quant_shape_to_byte_shape(shape, kind)
        at = self.data_offset + offset
        end = self._end(at, n_bytes, f"the tensor {name}")
        data = self.data[at:end].view(dtype).reshape(shape)
        return ReaderTensor(name=name, tensor_type=kind, shape=dims, n_elements=n_elements, n_bytes=n_bytes,
                            data_offset=at, data=data, field=ReaderField(start, name))
