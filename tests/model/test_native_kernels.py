"""Native kernels: the one-query attention against a float64 numpy reference, and the build falling back to the
torch paths (never failing) where no compiler works or ATLAS_NATIVE=0."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from model.native import attention
from tests.app.apptest import ROOT


def reference_attention(q, keys, values):
    """softmax(q . k / sqrt(hd)) v per head in float64, query head h reading KV head h // (H / KV)."""
    H, hd = q.shape
    group = H // keys.shape[0]
    pattern = np.empty((H, keys.shape[1]))
    out = np.empty((H, hd))
    for h in range(H):
        scores = keys[h // group].astype(np.float64) @ q[h].astype(np.float64) / np.sqrt(hd)
        p = np.exp(scores - scores.max())
        pattern[h] = p / p.sum()
        out[h] = pattern[h] @ values[h // group].astype(np.float64)
    return pattern, out


@pytest.mark.skipif(not attention.available(), reason="no C compiler: torch path")
@pytest.mark.parametrize("heads, kv_heads, lengths", [(4, 2, [1]), (9, 3, [37, 5, 120]), (8, 8, [300, 1])])
def test_one_query_attention_matches_float64_for_each_sequence_of_a_batch(heads, kv_heads, lengths):
    rng = np.random.default_rng(len(lengths))
    hd = 16
    caches = [(rng.standard_normal((kv_heads, n + 20, hd)).astype(np.float32) * 3,       # room for more positions
               rng.standard_normal((kv_heads, n + 20, hd)).astype(np.float32)) for n in lengths]
    keys = [k[:, :n] for (k, _), n in zip(caches, lengths, strict=True)]
    values = [v[:, :n] for (_, v), n in zip(caches, lengths, strict=True)]
    q = rng.standard_normal((len(lengths), heads, hd)).astype(np.float32)
    pattern, out = attention.one_query_attention(q, keys, values, 1 / np.sqrt(hd))
    for b, n in enumerate(lengths):
        want_pattern, want_out = reference_attention(q[b], keys[b], values[b])
        np.testing.assert_allclose(pattern[b, :, :n], want_pattern, atol=1e-6)
        np.testing.assert_allclose(out[b], want_out, atol=1e-5)
        alone_pattern, alone_out = attention.one_query_attention(q[b:b + 1], keys[b:b + 1], values[b:b + 1],
                                                                 1 / np.sqrt(hd))
        assert np.array_equal(alone_pattern[0], pattern[b, :, :n]) and np.array_equal(alone_out[0], out[b])


PROBE = """
import json
from model.native import attention, int8_linear
from model import load_model
lm = load_model()
print(json.dumps({"int8": int8_linear.available(), "attention": attention.available(),
                  "text": lm.generate("Count with me: 1, 2, 3,", max_new_tokens=6, temperature=0).new_text}))
"""


def run_probe(env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_a_working_compiler_generation_runs_on_the_torch_path(tmp_path):
    fallback = run_probe({"CC": "/bin/false", "ATLAS_CACHE_DIR": str(tmp_path)})
    off = run_probe({"ATLAS_NATIVE": "0"})
    assert fallback["int8"] is False and fallback["attention"] is False and off["int8"] is False
    assert fallback["text"] == off["text"] and fallback["text"].strip()
