"""A property-based fuzz (hypothesis) of the GGUF metadata reader, run in a process of its own under an address-space
limit by tests/model/test_crafted_gguf.py: `python -c "from tests.gguf_fuzz import run; run(good, n)"`.

Files: GGUFs built from random parts (keys of every value type, strings and arrays whose declared lengths and counts
are small, huge or past the end, arrays of arrays, tensor records of random shapes, types and offsets), or a good
tiny model with bytes of its header and metadata overwritten or its end cut off. Property: the model picker's
describe() returns a ModelInfo and never raises; where it lists the file as usable, load_model() loads it or raises
ModelLoadError; nothing takes memory past the limit (a MemoryError fails the property). run() prints a JSON
summary: how many files each outcome had.
"""
from __future__ import annotations

import json
import re
import resource
import struct
import tempfile
from collections import Counter
from pathlib import Path

from gguf.constants import GGUFValueType as T
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BIG = [0, 1, 2, 7, 8, 9, 255, 256, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1]
SIZES = {T.UINT8: 1, T.INT8: 1, T.UINT16: 2, T.INT16: 2, T.UINT32: 4, T.INT32: 4, T.FLOAT32: 4, T.BOOL: 1,
         T.UINT64: 8, T.INT64: 8, T.FLOAT64: 8}
KEYS = ["general.architecture", "general.alignment", "llama.block_count", "llama.embedding_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.feed_forward_length",
        "llama.context_length", "llama.rope.freq_base", "llama.rope.scaling.type", "tokenizer.ggml.model",
        "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.pre",
        "tokenizer.chat_template", "general.name"]
TENSORS = ["token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight", "output.weight"]

counts = st.one_of(st.integers(0, 12), st.sampled_from(BIG))
u32s = st.one_of(st.integers(0, 40), st.sampled_from(BIG).map(lambda n: n % 2**32))


def u32(n: int) -> bytes:
    return struct.pack("<I", n % 2**32)


def u64(n: int) -> bytes:
    return struct.pack("<Q", n % 2**64)


@st.composite
def strings(draw) -> bytes:
    data = draw(st.one_of(st.binary(max_size=24), st.sampled_from([b"llama", b"gpt2", b"smollm", b"qwen2"])))
    return u64(draw(st.one_of(st.just(len(data)), counts))) + data


@st.composite
def values(draw, depth: int = 0) -> tuple[int, bytes]:
    """(a value type, possibly unknown, and bytes for a value of it, whose declared sizes may lie)."""
    kind = draw(st.one_of(st.sampled_from(list(T)), st.integers(13, 2**32 - 1)))
    if kind == T.STRING:
        return kind, draw(strings())
    if kind == T.ARRAY:
        item = draw(st.sampled_from(list(T)) if depth < 3 else st.sampled_from(sorted(SIZES)))
        n = draw(st.integers(0, 6))
        items = b"".join(draw(values(depth + 1))[1] if item == T.ARRAY else
                         draw(strings()) if item == T.STRING else draw(st.binary(min_size=SIZES[item],
                                                                                 max_size=SIZES[item]))
                         for _ in range(n))
        return kind, u32(item) + u64(draw(st.one_of(st.just(n), counts))) + items
    if kind in SIZES:
        return kind, draw(st.binary(min_size=SIZES[kind], max_size=SIZES[kind]))
    return kind, draw(st.binary(max_size=8))


@st.composite
def key_values(draw) -> bytes:
    key = draw(st.one_of(st.sampled_from(KEYS), st.text(max_size=12))).encode()
    kind, payload = draw(values())
    return u64(draw(st.one_of(st.just(len(key)), counts))) + key + u32(kind) + payload


@st.composite
def tensor_records(draw) -> bytes:
    name = draw(st.sampled_from(TENSORS)).encode()
    n_dims = draw(st.one_of(st.integers(0, 4), u32s))
    dims = b"".join(u64(draw(st.one_of(st.integers(0, 64), st.sampled_from(BIG)))) for _ in range(min(n_dims, 5)))
    return u64(len(name)) + name + u32(n_dims) + dims + u32(draw(u32s)) + u64(draw(counts))


@st.composite
def built_files(draw) -> bytes:
    kvs = draw(st.lists(key_values(), max_size=8))
    tensors = draw(st.lists(tensor_records(), max_size=4))
    header = b"GGUF" + u32(draw(st.sampled_from([3, 3, 3, 2, 1, 2**16]))) + \
        u64(draw(st.one_of(st.just(len(tensors)), counts))) + u64(draw(st.one_of(st.just(len(kvs)), counts)))
    return header + b"".join(kvs) + b"".join(tensors) + draw(st.binary(max_size=256))


@st.composite
def damaged_files(draw, good: bytes, metadata_end: int) -> bytes:
    """good with a few runs of its first metadata_end bytes overwritten (often by numbers of BIG), or cut short."""
    data = bytearray(good)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, metadata_end - 8))
        patch = draw(st.one_of(st.binary(min_size=1, max_size=8), st.sampled_from(BIG).map(u64),
                               st.sampled_from(BIG).map(u32)))
        data[at:at + len(patch)] = patch
    if draw(st.booleans()):
        del data[draw(st.integers(8, len(data))):]
    return bytes(data)


def _status(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) << 10


def run(good: str, max_examples: int, headroom_bytes: int = 1 << 30) -> None:
    """Fuzz describe() (and load_model() where describe lists the file as usable) with max_examples files, under
    an address-space limit of headroom_bytes above what the process maps once everything is imported; print the
    outcomes' counts as JSON. Any other exception (MemoryError included) propagates, shrunk by hypothesis."""
    import gguf

    from model import ModelLoadError, load_model
    from model.files.catalog import ModelInfo, describe

    good_bytes = Path(good).read_bytes()
    reader = gguf.GGUFReader(good)
    metadata_end = reader.tensors[0].field.offset
    load_model(path=good)                       # imports and first-use costs before the limit
    limit = _status("VmSize") + headroom_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    outcomes: Counter = Counter()
    folder = Path(tempfile.mkdtemp(prefix="gguf-fuzz-"))

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(built_files(), damaged_files(good_bytes, metadata_end)))
    def property_(data: bytes) -> None:
        path = folder / "fuzzed.gguf"
        path.write_bytes(data)
        info = describe(path)
        assert isinstance(info, ModelInfo)
        if info.ok:
            try:
                load_model(path=path)
                outcomes["loaded"] += 1
            except ModelLoadError:
                outcomes["listed, refused at load"] += 1
        else:
            outcomes["refused: " + _kind(info.error)] += 1

    property_()
    print(json.dumps(dict(outcomes)))


def _kind(error: str) -> str:
    for words in ("truncated or damaged", "this app reads", "GGUF allows at most", "array of arrays",
                  "not a readable GGUF", "not a GGUF file", "Attention Atlas runs", "type this app cannot read"):
        if words in error:
            return words
    return "other"
