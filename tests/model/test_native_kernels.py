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
@pytest.mark.parametrize("heads, kv_heads, length", [(4, 2, 1), (9, 3, 37), (8, 8, 300)])
def test_one_query_attention_matches_float64(heads, kv_heads, length):
    rng = np.random.default_rng(length)
    hd = 16
    cache_k = rng.standard_normal((kv_heads, length + 20, hd)).astype(np.float32) * 3   # room for more positions
    cache_v = rng.standard_normal((kv_heads, length + 20, hd)).astype(np.float32)
    q = rng.standard_normal((heads, hd)).astype(np.float32)
    pattern, out = attention.one_query_attention(q, cache_k[:, :length], cache_v[:, :length], 1 / np.sqrt(hd))
    want_pattern, want_out = reference_attention(q, cache_k[:, :length], cache_v[:, :length])
    np.testing.assert_allclose(pattern, want_pattern, atol=1e-6)
    np.testing.assert_allclose(out, want_out, atol=1e-5)
    np.testing.assert_allclose(pattern.sum(-1), 1, atol=1e-6)


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
