"""model.heap.paused_gc: the collector off inside, back as it was afterwards."""
import gc

from model.files.heap import paused_gc


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
