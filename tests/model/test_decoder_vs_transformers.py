"""Our float32 forward pass against an independent implementation: transformers loading the same GGUF (eager)."""
import random

import numpy as np
import pytest
import torch

PROMPTS = {
    "english": "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined "
               "movable metal type, oil-based ink and a wooden press adapted from winemaking to produce books that "
               "were cheaper and more uniform than anything copied by hand.",
    "code": "def fibonacci(n: int) -> list[int]:\n    seq = [0, 1]\n    while len(seq) < n:\n        "
            "seq.append(seq[-1] + seq[-2])\n    return seq[:n]\n\nprint(fibonacci(12))\n",
    "non_ascii": "Zürich liegt am Zürichsee. 東京は日本の首都です。Ёжик в тумане — мультфильм 1975 года. "
                 "مرحبا 🌍 café",
}


def repeated_random_ids(seed: int = 0, n: int = 30) -> list[int]:
    rng = random.Random(seed)
    block = [rng.randrange(300, 40000) for _ in range(n)]
    return block + block


def reference(hf_model, ids):
    with torch.no_grad():
        out = hf_model(torch.tensor([ids]), output_attentions=True)
    attention = torch.stack([a[0] for a in out.attentions]).numpy()  # [L, H, T, T]
    return out.logits[0, -1].numpy(), attention


def cases(lm):
    yield from ((name, lm.encode(text)) for name, text in PROMPTS.items())
    yield "repeated_random", repeated_random_ids()


def test_prompts_are_long_enough(lm):
    for name, ids in cases(lm):
        assert 20 <= len(ids) <= 80, (name, len(ids))


@pytest.mark.parametrize("case", ["english", "code", "non_ascii", "repeated_random"])
def test_logits_and_every_layer_attention_match(lm, hf_model, case):
    ids = dict(cases(lm))[case]
    trace = lm.run_ids(ids)
    ref_logits, ref_attention = reference(hf_model, ids)
    assert trace.attention.shape == ref_attention.shape
    np.testing.assert_allclose(trace.next_token_logits, ref_logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(trace.attention, ref_attention, atol=1e-4, rtol=0)
    for layer in (0, 15, 29):
        np.testing.assert_allclose(lm.layer_detail(trace, layer).pattern, ref_attention[layer], atol=1e-4, rtol=0)


def test_long_text_stored_as_float16_stays_close(lm, hf_model):
    ids = repeated_random_ids(seed=1, n=150)  # 300 tokens: above the float32 budget
    trace = lm.run_ids(ids)
    ref_logits, ref_attention = reference(hf_model, ids)
    assert trace.attention.dtype == np.float16
    np.testing.assert_allclose(trace.next_token_logits, ref_logits, atol=1e-3, rtol=0)
    np.testing.assert_allclose(trace.attention.astype(np.float32), ref_attention, atol=6e-4, rtol=0)
