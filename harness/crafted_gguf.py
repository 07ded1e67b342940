"""Crafted GGUF files: a valid tiny model (harness/tiny_gguf.py) with its metadata rewritten byte for byte, as a
hostile visitor would upload it (huge arrays, huge strings, arrays of arrays, counts past the end, a swollen
vocabulary), and probe(), which reads one in a fresh process and reports what the loader said and the peak memory
it took. Used by tests/model/test_crafted_gguf.py and bench/bench_crafted_files.py.

with_records(good, out, records) copies good, replacing its key-value records of the names given (or adding them
after its own keys) and adding a padding key so that the tensor data stays aligned: the file is otherwise good.
"""
from __future__ import annotations

import json
import re
import resource
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from harness.tiny_gguf import Tiny, smollm_vocab, write_tiny

T = gguf.GGUFValueType
GOOD = Tiny(arch="llama", n_merges=200)


def write_good(path: Path) -> Path:
    """The tiny llama every crafted file starts from (452 tokens, two layers, F16)."""
    write_tiny(path, GOOD, smollm_vocab(GOOD.n_merges))
    return path


def string(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def record(key: str, kind: T, payload: bytes) -> bytes:
    """One key-value record: the key, the value's type, the value's bytes."""
    return string(key.encode()) + struct.pack("<I", kind) + payload


def array(item: T, count: int, items: bytes) -> bytes:
    """An array value's bytes: the items' type, the count it declares, the items."""
    return struct.pack("<IQ", item, count) + items


def numbers(values: np.ndarray) -> bytes:
    return values.astype(values.dtype.newbyteorder("<")).tobytes()


def one_byte_strings(count: int, byte: bytes = b"a") -> bytes:
    """count strings of one byte each, as a string array's items (9 bytes each)."""
    items = np.zeros((count, 9), np.uint8)
    items[:, 0], items[:, 8] = 1, byte[0]
    return items.tobytes()


def nested_arrays(depth: int) -> bytes:
    """An array value holding one array holding one array ... depth deep, the innermost an empty INT32 array."""
    return struct.pack("<IQ", T.ARRAY, 1) * (depth - 1) + struct.pack("<IQ", T.INT32, 0)


def with_records(good: Path, out: Path, records: dict[str, bytes]) -> Path:
    """good with each of records' key-value records (key -> record bytes) in place of its record of that key, or
    after its last one; a padding key keeps the tensor data at the same alignment."""
    reader = gguf.GGUFReader(good)
    raw = good.read_bytes()
    fields = [f for name, f in reader.fields.items() if not name.startswith("GGUF.")]
    ends = [f.offset for f in fields[1:]] + [reader.tensors[0].field.offset]
    kept = {f.name: raw[f.offset:end] for f, end in zip(fields, ends, strict=True)}
    body = b"".join(records.pop(name, part) for name, part in kept.items()) + b"".join(records.values())
    count = len(kept) + len(records)
    start, stop = fields[0].offset, ends[-1]
    grown = len(body) - (stop - start)
    name_length = (-(grown + 13 + len("general.pad"))) % reader.alignment
    body += record("general.pad" + "x" * name_length, T.UINT8, b"\0")
    header = raw[:16] + struct.pack("<Q", count + 1)
    out.write_bytes(header + raw[24:start] + body + raw[stop:])
    return out


def patched(good: Path, out: Path, offset: int, data: bytes) -> Path:
    """good with data written over its bytes at offset."""
    raw = bytearray(good.read_bytes())
    raw[offset:offset + len(data)] = data
    out.write_bytes(bytes(raw))
    return out


def _first_tensor_dims(good: Path) -> int:
    """Byte offset of the first tensor record's n_dims."""
    reader = gguf.GGUFReader(good)
    return reader.tensors[0].field.offset + 8 + len(reader.tensors[0].name)


def _many_keys(count: int) -> dict[str, bytes]:
    return {f"general.k{i}": record(f"general.k{i}", T.UINT8, b"\1") for i in range(count)}


# Each attack: (what it is, a writer: (good file, out file) -> out file)
Attack = tuple[str, Callable[[Path, Path], Path]]
ATTACKS: dict[str, Attack] = {
    "int32_4M": ("an extra key of 4,000,000 INT32 values", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, array(T.INT32, 4_000_000, numbers(np.arange(4_000_000,
                                                                                                  dtype=np.int32))))})),
    "int32_1M": ("an extra key of 1,000,000 INT32 values (within the limit)", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, array(T.INT32, 1_000_000, numbers(np.arange(1_000_000,
                                                                                                  dtype=np.int32))))})),
    "strings_2M": ("an extra key of 2,000,000 one-byte strings", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, array(T.STRING, 2_000_000, one_byte_strings(2_000_000)))})),
    "strings_60k": ("an extra key of 60,000 one-byte strings (within the limit)", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, array(T.STRING, 60_000, one_byte_strings(60_000)))})),
    "string_64MB": ("an extra string of 64 MB", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.STRING, string(b"x" * (64 << 20)))})),
    "string_1MB": ("a chat template of 1 MiB (the limit)", lambda g, o: with_records(g, o, {
        "tokenizer.chat_template": record("tokenizer.chat_template", T.STRING, string(b"x" * (1 << 20)))})),
    "nested_100k": ("an array of arrays 100,000 deep", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, nested_arrays(100_000))})),
    "nested_2": ("an array of one array of INT32", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, nested_arrays(2))})),
    "numbers_past_end": ("an INT32 array declaring 2^62 items", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, array(T.INT32, 1 << 62, b""))})),
    "strings_past_end": ("a string array declaring 10^15 items", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.ARRAY, array(T.STRING, 10**15, b""))})),
    "string_past_end": ("a string declaring 2^63 bytes", lambda g, o: with_records(g, o, {
        "general.junk": record("general.junk", T.STRING, struct.pack("<Q", 1 << 63))})),
    "keys_past_end": ("a header declaring 2^64 - 1 keys", lambda g, o: patched(g, o, 16, b"\xff" * 8)),
    "tensors_past_end": ("a header declaring 2^40 tensors", lambda g, o: patched(g, o, 8, struct.pack("<Q", 1 << 40))),
    "keys_100k": ("100,000 one-byte keys", lambda g, o: with_records(g, o, _many_keys(100_000))),
    "dims_1000": ("a tensor of 1,000 dimensions", lambda g, o: patched(g, o, _first_tensor_dims(g),
                                                                      struct.pack("<I", 1000))),
    "vocab_1.5M": ("a vocabulary swollen to 1,500,000 tokens", lambda g, o: with_records(g, o, {
        "tokenizer.ggml.tokens": record("tokenizer.ggml.tokens", T.ARRAY,
                                        array(T.STRING, 1_500_000, one_byte_strings(1_500_000)))})),
    "vocab_524k": ("a vocabulary of 524,288 tokens (the limit)", lambda g, o: with_records(g, o, {
        "tokenizer.ggml.tokens": record("tokenizer.ggml.tokens", T.ARRAY,
                                        array(T.STRING, 1 << 19, one_byte_strings(1 << 19))),
        "tokenizer.ggml.token_type": record("tokenizer.ggml.token_type", T.ARRAY,
                                            array(T.INT32, 1 << 19, numbers(np.ones(1 << 19, np.int32))))})),
}


def write_attack(name: str, good: Path, folder: Path) -> Path:
    return ATTACKS[name][1](good, folder / f"{name}.gguf")


def _status(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) << 10


def probe(good: str, paths: list[str], headroom_bytes: int) -> list[dict]:
    """In this (fresh) process: load good (so imports and first-use costs are paid), then describe() and load_model()
    each of paths under an address-space limit of headroom_bytes above what the process has mapped. For each: the
    error describe() lists and the one load_model() raised (None when it loaded), the peak resident memory above
    the resident memory before (VmHWM reset through /proc/self/clear_refs) and the seconds taken."""
    import gc

    from model import ModelLoadError, load_model
    from model.files.catalog import describe

    load_model(path=good)
    describe(good)
    limit = _status("VmSize") + headroom_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    results = []
    for path in paths:
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")               # VmHWM := VmRSS
        before = _status("VmRSS")
        start = time.perf_counter()
        info = describe(path)
        try:
            load_model(path=path)
            error = None
        except ModelLoadError as exc:
            error = str(exc)
        except MemoryError:
            error = "MemoryError"
        results.append({"listed_error": info.error, "error": error, "peak_rss_bytes": _status("VmHWM") - before,
                        "seconds": time.perf_counter() - start})
    return results


def probe_in_subprocess(good: Path, paths: list[Path], headroom_bytes: int = 2 << 30,
                        timeout_s: float = 600) -> list[dict]:
    """probe() in a fresh Python process (its memory and limits apart from the caller's); RuntimeError with the
    process's output when it fails."""
    code = ("import json, sys\nfrom harness.crafted_gguf import probe\n"
            f"print(json.dumps(probe({str(good)!r}, {[str(p) for p in paths]!r}, {headroom_bytes})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s,
                         cwd=Path(__file__).resolve().parent.parent)
    if out.returncode != 0:
        raise RuntimeError(f"the probe failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
