"""model.files.heap: paused_gc (the collector off inside, back as it was afterwards) and release_mapped."""
import gc
import sys

import numpy as np
import pytest

from model.files.heap import paused_gc, release_mapped


def test_paused_gc_restores_the_collector():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        cycle = []
        cycle.append(cycle)
    assert gc.isenabled()
    try:
        with paused_gc():
            raise RuntimeError("a failed load")
    except RuntimeError:
        pass
    assert gc.isenabled()


def test_paused_gc_leaves_a_disabled_collector_disabled():
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def rss_file_kb() -> int:
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("RssFile:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")
def test_release_mapped_drops_a_file_mappings_pages_and_keeps_its_data(tmp_path):
    """A loaded tensor's raw data is a view of the file mapping: reading it makes its pages resident; release_mapped
    drops them from this process (the load of a 0.5B model touched its whole 530 MB file), and a later read gets the
    same bytes back from the file."""
    path = tmp_path / "weights.bin"
    data = np.random.default_rng(0).integers(0, 256, 16 << 20, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    mapped = np.memmap(path, mode="r")
    view = mapped[4096 * 3 + 100:].view(np.ndarray)                 # not page-aligned, as a tensor's data is
    assert int(view.sum(dtype=np.int64)) == int(data[4096 * 3 + 100:].sum(dtype=np.int64))   # every page touched
    before = rss_file_kb()
    release_mapped(view)
    assert before - rss_file_kb() > 12 * 1024                        # most of the 16 MB left this process
    np.testing.assert_array_equal(view[:1000], data[4096 * 3 + 100:4096 * 3 + 1100])
