"""Crafted GGUF files (harness/crafted_gguf.py) as a hostile visitor would put them in the models folder: each is
refused with a message naming the key and the limit, or read, and describe() + load_model() of it take peak memory
within a small multiple of the file's size (measured in a fresh process: VmHWM, under an address-space limit that
turns a runaway allocation into a MemoryError). The reader's arrays are views of the mapped file, read as the gguf
package's reader reads them (big-endian files too); a hypothesis fuzz of describe() runs under a memory limit."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from harness.crafted_gguf import (
    ATTACKS,
    T,
    array,
    numbers,
    probe_in_subprocess,
    record,
    string,
    with_records,
    write_attack,
    write_good,
)
from model import ModelLoadError, load_model
from model.files import gguf_reader
from model.files.gguf import open_reader, read_gguf

REFUSED = {  # attack -> what load_model and the picker say (None: read and loaded)
    "int32_4M": r"declares general\.junk with 4,000,000 items; this app reads at most 1,048,576 there",
    "int32_1M": None,
    "strings_2M": r"declares general\.junk with 2,000,000 items; this app reads at most 65,536 there",
    "strings_60k": None,
    "string_64MB": r"declares general\.junk as a string of 67,108,864 bytes; this app reads at most 1,048,576",
    "string_1MB": None,
    "nested_100k": r"declares general\.junk as an array of arrays",
    "nested_2": r"declares general\.junk as an array of arrays",
    "numbers_past_end": r"truncated or damaged: it declares 18,446,744,073,709,551,616 bytes of general\.junk",
    "strings_past_end": r"truncated or damaged: it declares 8,000,000,000,000,000 bytes of general\.junk",
    "string_past_end": r"declares general\.junk as a string of 9,223,372,036,854,775,808 bytes",
    "keys_past_end": r"truncated or damaged: it declares 18,446,744,073,709,551,615 metadata keys, more than",
    "tensors_past_end": r"truncated or damaged: it declares 1,099,511,627,776 tensors, more than",
    "keys_100k": r"declares 100,019 metadata keys; this app reads at most 8,192",
    "dims_1000": r"declares the tensor token_embd\.weight with 1,000 dimensions; GGUF allows at most 4",
    "vocab_1.5M": r"declares tokenizer\.ggml\.tokens with 1,500,000 items; this app reads at most 524,288 there "
                  r"\(the largest real vocabularies have ~262k tokens\)",
    "vocab_524k": r"token_embd\.weight \(452, 64\) \(expected \(524288, 64\)\)",
}
MIB = 1 << 20


@pytest.fixture(scope="module")
def crafted(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("crafted")
    good = write_good(folder / "good.gguf")
    return good, {name: write_attack(name, good, folder) for name in ATTACKS}


@pytest.fixture(scope="module")
def probed(crafted) -> dict[str, dict]:
    """Every attack's describe() + load_model() in one fresh process, 1 GiB of address space to spare."""
    good, files = crafted
    return dict(zip(files, probe_in_subprocess(good, list(files.values()), headroom_bytes=1 << 30), strict=True))


def test_every_attack_has_an_expectation():
    assert set(REFUSED) == set(ATTACKS)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_crafted_file_is_refused_or_read_within_a_small_multiple_of_its_size(crafted, probed, name):
    size = crafted[1][name].stat().st_size
    result = probed[name]
    if REFUSED[name] is None:
        assert result["error"] is None and result["listed_error"] is None, result
    else:
        assert result["error"] is not None and result["error"] != "MemoryError", result
        assert re.search(REFUSED[name], result["error"]), result["error"]
        assert result["listed_error"] == result["error"]                # the picker lists the loader's reason
    assert result["peak_rss_bytes"] <= 2 * size + 16 * MIB, (name, size, result)


def test_number_arrays_are_views_of_the_mapped_file_and_string_arrays_one_offsets_array(crafted):
    reader = open_reader(crafted[1]["int32_1M"])
    junk = reader.fields["general.junk"]
    assert np.shares_memory(junk.value, reader.data) and junk.value.dtype == np.int32
    np.testing.assert_array_equal(junk.value, np.arange(1_000_000, dtype=np.int32))     # the values written
    assert junk.contents(999_999) == 999_999 and junk.count == len(junk.data) == 1_000_000
    strings = open_reader(crafted[1]["strings_60k"]).fields["general.junk"].value
    assert isinstance(strings, gguf_reader.StringArray) and strings.bounds.shape == (60_001,)
    assert len(strings) == 60_000 and set(strings) == {b"a"} and strings[-1] == b"a" and strings.nbytes == 60_000


def test_the_reader_reads_what_the_gguf_package_reads(crafted):
    """The tiny model and a 60k-string file: every field's types, offset and contents, every tensor's data."""
    for path in (crafted[0], crafted[1]["strings_60k"]):
        ours, stock = open_reader(path), gguf.GGUFReader(path)
        assert list(ours.fields) == list(stock.fields)
        for key, field in stock.fields.items():
            mine = ours.fields[key]
            assert (mine.types, mine.offset, mine.contents()) == (field.types, field.offset, field.contents()), key
        for mine, theirs in zip(ours.tensors, stock.tensors, strict=True):
            assert (mine.name, mine.tensor_type, mine.n_bytes, mine.data_offset) == \
                   (theirs.name, theirs.tensor_type, theirs.n_bytes, theirs.data_offset)
            np.testing.assert_array_equal(mine.data, theirs.data)


def test_a_big_endian_file_reads_as_the_gguf_package_reads_it(tmp_path):
    path = tmp_path / "big.gguf"
    writer = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian.BIG)
    writer.add_uint32("llama.block_count", 7)
    writer.add_float32("llama.rope.freq_base", 1e4)
    writer.add_string("general.name", "big end")
    writer.add_array("tokenizer.ggml.tokens", ["a", "bc", "", "中文"])
    writer.add_array("tokenizer.ggml.scores", [0.5, -1.25, 3.0, 4.0])
    writer.add_tensor("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours, stock = open_reader(path), gguf.GGUFReader(path)
    assert ours.byte_order == stock.byte_order == "S"
    for key, field in stock.fields.items():
        assert ours.fields[key].contents() == field.contents(), key
    assert ours.fields["tokenizer.ggml.tokens"].contents() == ["a", "bc", "", "中文"]
    np.testing.assert_array_equal(ours.tensors[0].data, np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize(("key", "values", "said"), [
    ("tokenizer.ggml.merges", 1_048_577, r"tokenizer\.ggml\.merges with 1,048,577 items; this app reads at most "
                                         r"1,048,576 there \(the longest real merge lists have ~450k merges\)"),
    ("tokenizer.ggml.token_type", 524_289, r"tokenizer\.ggml\.token_type with 524,289 items"),
])
def test_each_tokenizer_array_has_its_own_limit(crafted, tmp_path, key, values, said):
    item = T.STRING if key.endswith("merges") else T.INT32
    payload = (b"\1\0\0\0\0\0\0\0a" * values) if item == T.STRING else numbers(np.zeros(values, np.int32))
    path = with_records(crafted[0], tmp_path / "over.gguf", {key: record(key, T.ARRAY, array(item, values, payload))})
    with pytest.raises(ModelLoadError, match=said):
        load_model(path=path)


def test_a_string_item_over_its_limit_names_the_key(crafted, tmp_path):
    long_token = b"x" * (64 * 1024 + 1)
    key = "tokenizer.ggml.tokens"
    payload = array(T.STRING, 2, b"\1\0\0\0\0\0\0\0a" + len(long_token).to_bytes(8, "little") + long_token)
    path = with_records(crafted[0], tmp_path / "long.gguf", {key: record(key, T.ARRAY, payload)})
    with pytest.raises(ModelLoadError, match=r"an item of tokenizer\.ggml\.tokens of 65,537 bytes; this app reads "
                                             r"at most 65,536"):
        load_model(path=path)


@pytest.mark.parametrize(("value", "said"), [
    (record("tokenizer.chat_template", T.STRING, string(b"{{ \xff\xfe }}")), "UnicodeDecodeError"),
    (record("tokenizer.chat_template", T.UINT32, b"\7\0\0\0"), None),
])
def test_a_crafted_chat_template_is_refused_or_left_out(crafted, tmp_path, value, said):
    path = with_records(crafted[0], tmp_path / "template.gguf", {"tokenizer.chat_template": value})
    if said is None:
        assert read_gguf(path).chat_template is None                          # not a string: no template
    else:
        with pytest.raises(ModelLoadError, match=f"template.gguf is not a readable GGUF file .*{said}"):
            read_gguf(path)


def test_the_installed_model_is_within_every_limit():
    from model.files.package import installed_model_path

    reader = open_reader(installed_model_path())
    assert reader.fields["tokenizer.ggml.tokens"].count == 49152
    assert reader.fields["tokenizer.ggml.merges"].count == 48900


def test_a_fuzz_of_the_picker_and_loader_stays_within_a_memory_limit(crafted):
    """hypothesis: 300 built or damaged files, describe() (and load_model() where it passes) in a process with
    1 GiB of address space to spare; any exception but a listed refusal (a MemoryError included) fails."""
    code = f"from tests.gguf_fuzz import run\nrun({str(crafted[0])!r}, 300)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-4000:]
    outcomes = json.loads(out.stdout.strip().splitlines()[-1])
    assert sum(outcomes.values()) >= 300
    refused = {kind for kind in outcomes if kind.startswith("refused")}
    assert {"refused: truncated or damaged", "refused: this app reads", "refused: not a readable GGUF"} <= refused


def test_the_pickers_catalog_of_a_folder_of_crafted_files_lists_each_with_its_reason_in_bounded_memory(crafted):
    """models_folder.catalog() (what the picker draws at every run, and after each restart) over a folder holding
    every attack, in a fresh process under an address-space limit: every file listed, each refused one with the
    loader's reason, and the peak memory of the whole listing small beside the folder's 135 MB."""
    folder = crafted[0].parent
    code = ("import json, re, resource\nfrom pathlib import Path\nfrom app_core import models_folder\n"
            "def status(k):\n    return int(re.search(k + r':\\s+(\\d+) kB', Path('/proc/self/status').read_text())"
            ".group(1)) << 10\n"
            "limit = status('VmSize') + (1 << 30)\nresource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
            "Path('/proc/self/clear_refs').write_text('5')\nbefore = status('VmRSS')\n"
            "infos = models_folder.catalog()\n"
            "print(json.dumps({'listed': {i.name: i.error for i in infos}, 'peak': status('VmHWM') - before}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ, "ATLAS_MODELS_DIR": str(folder)})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(result["listed"]) == {"good", *ATTACKS}
    for name, expected in REFUSED.items():
        error = result["listed"][name]
        assert (error is None) if expected is None else re.search(expected, error or ""), (name, error)
    folder_bytes = sum(p.stat().st_size for p in folder.glob("*.gguf"))
    assert folder_bytes > 128 * MIB and result["peak"] < 48 * MIB, result["peak"]
