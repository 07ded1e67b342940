"""Concurrent generations share decoding steps (model/decoder/batching.py) and get exactly what they get alone.

"Alone" is a generation run when nothing else runs (a batch of one); "batched" runs the same generations from
several threads at once, so their steps go through the model in one matrix product. Tokens must be identical
(greedy, and sampled with the same seed), attention rows within 1e-5; a cancelled stream leaves the others
untouched; a stream that reaches end-of-sequence leaves the batch while the others go on.
"""
import threading

import numpy as np
import pytest

from harness.tiny_gguf import Tiny, write_tiny
from model import load_model
from model.decoder import generation as G
from model.decoder.step_weights import steps_for
from model.native import int8_linear

PROMPTS = ["The cat sat on the mat because", "Count with me: 1, 2, 3,", "<b>bold</b> and", "Hi",
           "def fibonacci(n):\n    return", "Le chat que ma voisine a adopté", "Once upon a time", "2 + 2 ="]
SETTINGS = [dict(temperature=0), dict(temperature=1.0, seed=3), dict(temperature=0.7, top_k=20, seed=11),
            dict(temperature=1.3, top_p=0.9, seed=5)]


def concurrently(fns) -> list:
    """Run every function in its own thread, all released at once; their results in order."""
    results = [None] * len(fns)
    start = threading.Barrier(len(fns))

    def run(i, fn):
        start.wait()
        results[i] = fn()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return results


def assert_same(alone, batched):
    assert batched.new_token_ids == alone.new_token_ids
    assert batched.stop_reason == alone.stop_reason
    for a, b in zip(alone.steps, batched.steps, strict=True):
        np.testing.assert_allclose(b.attention.astype(np.float32), a.attention.astype(np.float32), atol=1e-5)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """F16 llama and gpt2 (float32 products in torch), Q4_1 llama and Q8_0 gpt2 (the native int8 step)."""
    folder = tmp_path_factory.mktemp("batching")
    out = {}
    for arch, quant in (("llama", "F16"), ("gpt2", "F16"), ("llama", "Q4_1"), ("gpt2", "Q8_0")):
        name = arch if quant == "F16" else f"{arch}-{quant}"
        write_tiny(folder / f"{name}.gguf", Tiny(arch=arch, quant=quant))
        out[name] = folder / f"{name}.gguf"
    return out


def test_ten_threads_on_the_default_model_equal_their_runs_alone(lm):
    jobs = [(PROMPTS[i % len(PROMPTS)], SETTINGS[i % len(SETTINGS)]) for i in range(10)]
    alone = [lm.generate(p, max_new_tokens=8, **s) for p, s in jobs]
    batched = concurrently([lambda p=p, s=s: lm.generate(p, max_new_tokens=8, **s) for p, s in jobs])
    for a, b in zip(alone, batched, strict=True):
        assert_same(a, b)


@pytest.mark.parametrize("arch, keep_quantized", [("llama", False), ("gpt2", False), ("llama-Q4_1", False),
                                                  ("gpt2-Q8_0", False), ("gpt2-Q8_0", True)])
def test_batched_equals_alone_for_each_architecture(tiny_models, arch, keep_quantized):
    lm = load_model(path=tiny_models[arch], keep_quantized=keep_quantized)
    jobs = [(PROMPTS[i], SETTINGS[i % len(SETTINGS)]) for i in range(6)]
    alone = [lm.generate(p, max_new_tokens=12, **s) for p, s in jobs]
    batched = concurrently([lambda p=p, s=s: lm.generate(p, max_new_tokens=12, **s) for p, s in jobs])
    for a, b in zip(alone, batched, strict=True):
        assert_same(a, b)


def test_cancelling_one_stream_leaves_the_others_untouched(tiny_models):
    lm = load_model(path=tiny_models["llama"])
    alone = [lm.generate(p, max_new_tokens=16, temperature=1.0, seed=i) for i, p in enumerate(PROMPTS[:4])]

    def cancelled_after_three():
        return lm.generate(PROMPTS[0], max_new_tokens=16, temperature=1.0, seed=0, on_step=lambda s: s.index == 2)

    fns = [cancelled_after_three] + [lambda i=i, p=p: lm.generate(p, max_new_tokens=16, temperature=1.0, seed=i)
                                     for i, p in enumerate(PROMPTS[1:4], start=1)]
    cut, *others = concurrently(fns)
    assert cut.stop_reason == "cancelled" and cut.new_token_ids == alone[0].new_token_ids[:3]
    for a, b in zip(alone[1:], others, strict=True):
        assert_same(a, b)


def test_a_stream_reaching_end_of_sequence_leaves_the_batch(tiny_models):
    lm = load_model(path=tiny_models["gpt2"])
    probe = lm.generate(PROMPTS[2], max_new_tokens=12, temperature=0)
    lm.eos_token_id = probe.new_token_ids[3]                 # this stream now ends at its 4th token (or earlier)
    stop = probe.new_token_ids.index(lm.eos_token_id) + 1
    alone = lm.generate(PROMPTS[4], max_new_tokens=12, temperature=1.0, seed=2)
    short, long = concurrently([lambda: lm.generate(PROMPTS[2], max_new_tokens=12, temperature=0),
                                lambda: lm.generate(PROMPTS[4], max_new_tokens=12, temperature=1.0, seed=2)])
    assert short.stop_reason == "eos" and len(short.steps) == stop
    assert_same(alone, long)


def test_streaming_steps_can_stop_early(tiny_models):
    lm = load_model(path=tiny_models["llama"])
    stream = lm.generate_steps(PROMPTS[0], max_new_tokens=20, temperature=0)
    first = [next(stream).token_id for _ in range(3)]
    stream.close()
    assert first == lm.generate(PROMPTS[0], max_new_tokens=3, temperature=0).new_token_ids


SHARED_PROMPTS = ["The cat sat on the mat because it was", "The cat sat on the mat and then it slept",
                  "The cat sat on the mat because it was", "The dog ran"]


@pytest.mark.parametrize("arch", ["default", "llama-Q4_1", "gpt2-Q8_0"])
def test_prompts_sharing_a_prefix_copy_it_and_get_their_numbers_alone(tiny_models, lm, arch, monkeypatch):
    model = lm if arch == "default" else load_model(path=tiny_models[arch])
    id_lists = [model.tokenizer.encode(p) for p in SHARED_PROMPTS]
    assert model.tokenizer.encode(SHARED_PROMPTS[1])[:6] == id_lists[0][:6]     # a prefix worth sharing

    def fresh():
        return G.IncrementalDecoder(model, 64)

    assert_prompts_run_as_rows(model)
    alone = [G.feed_together([fresh()], [ids])[0] for ids in id_lists]
    computed = []
    real_step_rows = G.step_rows
    monkeypatch.setattr(G, "step_rows", lambda decoders, ids, rows: computed.append(len(ids)) or
                        real_step_rows(decoders, ids, rows))
    together = G.feed_together([fresh() for _ in id_lists], id_lists)
    donor = fresh()
    G.feed_together([donor], [id_lists[0]])
    from_donor = G.feed_together([fresh(), fresh()], [id_lists[1], id_lists[2]], donors=[donor])
    for (a_logits, a_row), (b_logits, b_row) in zip(alone, together, strict=True):
        assert np.array_equal(a_logits, b_logits) and np.array_equal(a_row, b_row)
    for (a_logits, a_row), (b_logits, b_row) in zip(alone[1:3], from_donor, strict=True):
        assert np.array_equal(a_logits, b_logits) and np.array_equal(a_row, b_row)
    n_tokens = [len(ids) for ids in id_lists]
    assert sum(computed[:2]) < sum(n_tokens)                    # the shared prefixes were not computed twice
    assert computed[3] == 1 + n_tokens[1] - _shared(id_lists[0], id_lists[1])   # prompt 2: only its last token


def assert_prompts_run_as_rows(model) -> None:
    """Prompts share prefixes on the native kernels' rows path only (feed_together): skipped where the int8 kernel
    does not run (no compiler, a CPU without AVX2, ATLAS_NATIVE_ISA=portable, ATLAS_NATIVE=0), where the torch
    forward runs each prompt alone; failed where it runs but the model's steps are not all native."""
    if not int8_linear.available():
        pytest.skip("no native int8 kernel here: prompts run one by one in the torch forward, nothing is shared")
    assert steps_for(model).all_native


def _shared(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_nested_prompts_copy_from_the_longest_in_a_later_pass(lm, monkeypatch):
    text = "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined"
    id_lists = [lm.tokenizer.encode(text[:40 + 12 * i]) for i in range(6)]
    assert_prompts_run_as_rows(lm)
    alone = [G.feed_together([G.IncrementalDecoder(lm, 64)], [ids])[0] for ids in id_lists]
    computed = []
    real_step_rows = G.step_rows
    monkeypatch.setattr(G, "step_rows", lambda decoders, ids, rows: computed.append(len(ids)) or
                        real_step_rows(decoders, ids, rows))
    together = G.feed_together([G.IncrementalDecoder(lm, 64) for _ in id_lists], id_lists)
    for (a_logits, a_row), (b_logits, b_row) in zip(alone, together, strict=True):
        assert np.array_equal(a_logits, b_logits) and np.array_equal(a_row, b_row)
    longest = max(id_lists, key=len)
    assert computed[0] == len(longest)                          # the longest first, whole
    assert computed[1] == sum(len(ids) - min(_shared(ids, longest), len(ids) - 1) for ids in id_lists
                              if ids is not longest)            # then each shorter one past what it shares with it


TRACED = "Count with me: 1, 2, 3, <b>bold</b> 猫 🙂"


def test_a_traces_keys_and_values_are_what_transformers_caches(lm, hf_model):
    """The rotated keys and values a trace keeps (what starts a generation's cache) against transformers' own KV
    cache of the same tokens."""
    import torch

    trace = lm.run(TRACED)
    with torch.no_grad():
        cache = hf_model(torch.tensor([trace.token_ids]), use_cache=True).past_key_values
    for layer in range(lm.config.n_layers):
        np.testing.assert_allclose(trace.keys[layer], cache.layers[layer].keys[0].numpy(), atol=1e-4, rtol=1e-5)
        np.testing.assert_allclose(trace.values[layer], cache.layers[layer].values[0].numpy(), atol=1e-4,
                                   rtol=1e-5)


def test_a_generation_started_from_its_prompts_trace_writes_what_a_prompt_pass_writes(lm):
    trace = lm.run(TRACED)
    for settings in (dict(temperature=0), dict(temperature=0.7, seed=4)):
        passed = lm.generate(TRACED, max_new_tokens=16, **settings)
        started = lm.generate(TRACED, max_new_tokens=16, trace=trace, **settings)
        assert started.new_token_ids == passed.new_token_ids
        for a, b in zip(passed.steps, started.steps, strict=True):
            assert b.raw_prob == pytest.approx(a.raw_prob, abs=1e-5)
            np.testing.assert_allclose(b.attention.astype(np.float32), a.attention.astype(np.float32), atol=1e-3)
    first = lm.generate(TRACED, max_new_tokens=1, temperature=0, trace=trace).steps[0]
    assert np.array_equal(first.attention, trace.attention[:, :, -1].astype(np.float16))   # the trace's own row


@pytest.mark.parametrize("arch", ["default", "llama", "gpt2-Q8_0"])
def test_generations_started_from_traces_batched_equal_alone(tiny_models, lm, arch):
    model = lm if arch == "default" else load_model(path=tiny_models[arch])
    jobs = [(PROMPTS[i], SETTINGS[i % len(SETTINGS)], model.run(PROMPTS[i])) for i in range(6)]
    alone = [model.generate(p, max_new_tokens=10, trace=t, **s) for p, s, t in jobs]
    batched = concurrently([lambda p=p, s=s, t=t: model.generate(p, max_new_tokens=10, trace=t, **s)
                            for p, s, t in jobs])
    for a, b in zip(alone, batched, strict=True):
        assert_same(a, b)


def test_a_trace_of_other_tokens_or_under_another_mask_is_ignored(lm):
    passed = lm.generate(PROMPTS[1], max_new_tokens=6, temperature=0)
    T = len(lm.run(PROMPTS[1]).token_ids)
    masked = lm.run(PROMPTS[1], allowed=np.tril(np.ones((T, T), bool)))             # the causal mask, given
    assert masked.keys is None and masked.values is None
    for other in (lm.run(PROMPTS[0]), masked, lm.run(PROMPTS[1], max_tokens=T - 1)):
        g = lm.generate(PROMPTS[1], max_new_tokens=6, temperature=0, trace=other)
        assert g.new_token_ids == passed.new_token_ids
        for a, b in zip(passed.steps, g.steps, strict=True):
            assert np.array_equal(a.attention, b.attention)


def test_start_from_needs_an_empty_cache(lm):
    trace = lm.run(PROMPTS[0])
    decoder = G.IncrementalDecoder(lm, trace.n_tokens + 4)
    decoder.feed(trace.token_ids[:2])
    with pytest.raises(ValueError, match="empty cache"):
        decoder.start_from(trace)
