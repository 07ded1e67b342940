"""model/analysis/kv_cache_timing.py on the real model: every step timed, the cache's bytes, full passes where asked."""
from __future__ import annotations

import pytest

from model.analysis.kv_cache_timing import time_steps


def test_every_step_is_timed_and_the_cache_grows_by_a_token_each(lm):
    ids = lm.encode("The little robot looked at the stars every night, hoping that one day it could fly up.")
    steps = list(time_steps(lm, ids, n_prompt=10, full_every=3))
    assert [s.length for s in steps] == list(range(11, len(ids) + 1))
    per_token = 2 * lm.config.n_layers * lm.config.n_kv_heads * lm.config.head_dim * 4
    assert [s.cache_bytes for s in steps] == [s.length * per_token for s in steps]
    timed = [k for k, s in enumerate(steps) if s.full_s is not None]
    assert timed == sorted({*range(0, len(steps), 3), len(steps) - 1})
    assert all(s.cached_s > 0 for s in steps) and all(steps[k].full_s > 0 for k in timed)


def test_a_prompt_must_leave_steps(lm):
    with pytest.raises(ValueError, match="n_prompt"):
        list(time_steps(lm, [1, 2, 3], n_prompt=3))
