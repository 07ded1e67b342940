"""The interpreter's switch interval: Python's 5 ms, 1 ms while any generation decodes (app_core/scheduling.py)."""
from __future__ import annotations

import sys
import threading

from app_core import scheduling


def test_the_gil_hands_over_every_millisecond_only_while_a_generation_decodes():
    before = sys.getswitchinterval()
    sys.setswitchinterval(scheduling.SWITCH_INTERVAL_S)
    try:
        started, release = threading.Barrier(3), threading.Event()

        def generation():
            with scheduling.generating():
                started.wait()
                release.wait()

        threads = [threading.Thread(target=generation) for _ in range(2)]
        for t in threads:
            t.start()
        started.wait()
        assert sys.getswitchinterval() == scheduling.GENERATING_SWITCH_INTERVAL_S == 0.001
        with scheduling.generating():                  # a third one ends first: the others still decode
            pass
        assert sys.getswitchinterval() == 0.001
        release.set()
        for t in threads:
            t.join()
        assert sys.getswitchinterval() == scheduling.SWITCH_INTERVAL_S == 0.005
    finally:
        sys.setswitchinterval(before)
