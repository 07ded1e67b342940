"""Generation with a KV cache (model/generation.py) against independent references: transformers' greedy
`generate` on the same GGUF, our own full forward pass over each prefix, and sampling frequencies checked against
a distribution computed here from the logits with plain numpy."""
import threading

import numpy as np
import pytest
import torch

from model.decoder.generation import IncrementalDecoder, first_token_samples, prepare_prompt
from model.decoder.generation_records import MAX_NEW_TOKENS, GenerationSettings
from model.decoder.next_token import (
    SoftmaxWorkspace,
    choose_steps,
    choose_token,
    inverse_cdf,
    next_token_distribution,
    record_step,
)
from model.maths.sampling import top_ids
from model.native import token_choice

ENGLISH = "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg"
CODE = "def fibonacci(n: int) -> list[int]:\n    seq = [0, 1]\n    while len(seq) < n:\n"
OPENING = "Once upon a time, in a small village by the sea, there lived a"


def chat_ids(lm, user: str) -> list[int]:
    """A one-turn chat prompt built from control-token ids (independent of how text encodes '<|im_start|>')."""
    im_start, im_end = 1, 2
    assert lm.tokenizer.token_bytes(im_start) == b"<|im_start|>" and lm.tokenizer.token_bytes(im_end) == b"<|im_end|>"
    return [im_start, *lm.encode(f"user\n{user}"), im_end, *lm.encode("\n"), im_start, *lm.encode("assistant\n")]


def hf_greedy(hf_model, ids: list[int], n: int) -> list[int]:
    """transformers' greedy decoding on our token ids (its GGUF tokenizer has the wrong pre-tokenizer)."""
    inputs = torch.tensor([ids])
    with torch.no_grad():
        out = hf_model.generate(inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=n, do_sample=False,
                                pad_token_id=hf_model.config.eos_token_id)
    return out[0, len(ids):].tolist()


def softmax64(logits, temperature=1.0):
    z = np.asarray(logits, dtype=np.float64) / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def test_capital_of_france_is_paris(lm):
    assert lm.generate("The capital of France is", max_new_tokens=1, temperature=0).new_text == " Paris"


@pytest.mark.parametrize("kind", ["english", "code", "chat"])
def test_greedy_equals_transformers_generate(lm, hf_model, kind):
    ids = {"english": lm.encode(ENGLISH), "code": lm.encode(CODE),
           "chat": chat_ids(lm, "Write one sentence about the moon.")}[kind]
    g = lm.generate(ids, max_new_tokens=24, temperature=0)
    expected = hf_greedy(hf_model, ids, 24)
    assert g.new_token_ids == expected, (lm.decode(g.new_token_ids), lm.decode(expected))
    assert g.prompt_ids == ids and g.new_text == lm.decode(expected)


def test_each_cached_step_equals_a_full_forward(lm):
    """Sampled steps (so the path differs from greedy): logits, probabilities and attention rows of every step
    against lm.run_ids over the same prefix."""
    g = lm.generate(OPENING, max_new_tokens=12, temperature=1.0, top_k=40, seed=11)
    assert len(g.steps) == 12
    decoder = IncrementalDecoder(lm, g.prompt_len + 11)
    for t, step in enumerate(g.steps):
        prefix = g.prompt_ids + g.new_token_ids[:t]
        trace = lm.run_ids(prefix)
        assert trace.attention.dtype == np.float32                        # short prefixes: float32 reference
        logits, row = decoder.feed(prefix if t == 0 else prefix[-1:])
        np.testing.assert_allclose(logits, trace.next_token_logits, atol=1e-4, rtol=0)
        reference_row = trace.attention[:, :, -1, :]                       # [L, H, P + t]
        assert step.attention.shape == reference_row.shape == row.shape
        # float16 storage: within 1e-4 plus float16 rounding (relative 2^-11)
        np.testing.assert_allclose(step.attention.astype(np.float32), reference_row, atol=1e-4, rtol=2 ** -11)
        np.testing.assert_allclose(step.candidates.raw_probs,
                                   softmax64(trace.next_token_logits)[step.candidates.ids], atol=1e-5)
        assert step.raw_prob == pytest.approx(softmax64(trace.next_token_logits)[step.token_id], abs=1e-5)


def test_caches_share_one_rope_table_with_the_models_numbers(lm):
    """Each cache's cos / sin are views of one table per model (made once, not per request), equal to
    lm.rope_tables' at every position, also after the table grows for a longer cache."""
    small, other = IncrementalDecoder(lm, 40), IncrementalDecoder(lm, 7)
    assert np.shares_memory(small.cos_np, other.cos_np) and np.shares_memory(small.sin, other.sin.numpy())
    n = 3 * small.weights.ROPE_ROWS_MIN + 5                                # past the first table and its doubling
    for decoder in (small, IncrementalDecoder(lm, n), IncrementalDecoder(lm, 12)):
        cos, sin = lm.rope_tables(range(decoder.capacity))
        np.testing.assert_array_equal(decoder.cos_np, cos.numpy())
        np.testing.assert_array_equal(decoder.sin_np, sin.numpy())
        assert torch.equal(decoder.cos, cos) and torch.equal(decoder.sin, sin)


def test_chunked_prompt_longer_than_one_chunk_equals_full_forward(lm):
    ids = (lm.encode(ENGLISH + " " + CODE) * 20)[:300]                      # > PREFILL_CHUNK (256)
    logits, row = IncrementalDecoder(lm, len(ids)).feed(ids)
    trace = lm.run_ids(ids)
    np.testing.assert_allclose(logits, trace.next_token_logits, atol=1e-4, rtol=0)
    np.testing.assert_allclose(row.astype(np.float32), trace.attention[:, :, -1].astype(np.float32),
                               atol=1e-4, rtol=2 ** -10)                   # both sides float16 here


def test_step_record(lm):
    g = lm.generate(OPENING, max_new_tokens=6, temperature=0.7, top_k=5, seed=3)
    trace = lm.run(OPENING)
    cfg = lm.config
    assert g.prompt_tokens == trace.tokens and g.prompt_len == trace.n_tokens and not g.truncated
    assert g.settings == GenerationSettings(6, 0.7, 5, 1.0, 3) and g.stop_reason == "length"
    assert g.tokens == trace.tokens + [s.token for s in g.steps]
    p = softmax64(trace.next_token_logits, 0.7)                            # step 0 by hand
    order = np.argsort(-p, kind="stable")
    c = g.steps[0].candidates
    assert c.ids.tolist() == order[:10].tolist() and len(c.tokens) == 10
    np.testing.assert_allclose(c.probs, p[order[:10]], atol=1e-5)
    assert c.kept.tolist() == [True] * 5 + [False] * 5
    np.testing.assert_allclose(c.sampling_probs, np.r_[p[order[:5]] / p[order[:5]].sum(), [0] * 5], atol=1e-5)
    s = g.steps[0]
    assert s.rank == order.tolist().index(s.token_id) < 5 and s.n_kept == 5
    assert s.prob == pytest.approx(c.sampling_probs[s.rank], abs=1e-9)
    assert s.temperature_prob == pytest.approx(p[s.token_id], abs=1e-5)
    assert s.entropy_bits == pytest.approx(-(p[p > 0] * np.log2(p[p > 0])).sum(), abs=1e-4)
    for t, step in enumerate(g.steps):
        assert step.index == t and step.token == lm.token_strings([step.token_id])[0]
        assert step.attention.shape == (cfg.n_layers, cfg.n_heads, g.prompt_len + t)
        assert step.attention.dtype == np.float16 and not step.attention.flags.writeable
        np.testing.assert_allclose(step.attention.astype(np.float32).sum(-1), 1.0, atol=2e-3)
        assert np.all(np.diff(step.candidates.probs) <= 0)


def test_greedy_step_record(lm):
    s = lm.generate(OPENING, max_new_tokens=1, temperature=0).steps[0]
    p = softmax64(lm.run(OPENING).next_token_logits)
    assert s.token_id == int(np.argmax(p)) and s.rank == 0 and s.prob == 1.0 and s.n_kept == 1
    assert s.raw_prob == pytest.approx(p.max(), abs=1e-6) and s.temperature_prob == s.raw_prob
    assert s.candidates.kept.tolist() == [True] + [False] * 9
    assert s.candidates.sampling_probs.tolist() == [1.0] + [0.0] * 9


def test_same_seed_same_text_different_seeds_differ(lm):
    kwargs = dict(max_new_tokens=8, temperature=1.0, top_p=0.95)
    a = lm.generate(OPENING, seed=7, **kwargs)
    b = lm.generate(OPENING, seed=7, **kwargs)
    assert a.new_token_ids == b.new_token_ids and a.new_text == b.new_text
    for sa, sb in zip(a.steps, b.steps, strict=True):
        np.testing.assert_array_equal(sa.attention, sb.attention)
    texts = {lm.generate(OPENING, seed=seed, **kwargs).new_text for seed in range(8, 11)}
    assert len(texts | {a.new_text}) >= 3


def chi_square_p_value(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson's chi-square goodness of fit; categories expected below 5 are pooled into one."""
    expected = probs * counts.sum()
    small = expected < 5
    obs = np.r_[counts[~small], counts[small].sum()]
    exp = np.r_[expected[~small], expected[small].sum()]
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    stat = ((obs - exp) ** 2 / exp).sum()
    df = len(obs) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def top_k_distribution(logits, temperature: float, k: int) -> np.ndarray:
    p = softmax64(logits, temperature)
    keep = np.argsort(-p)[:k]
    out = np.zeros_like(p)
    out[keep] = p[keep] / p[keep].sum()
    return out


def test_first_token_frequencies_match_the_filtered_distribution(lm):
    seeds = range(2000)
    logits = lm.run(OPENING).next_token_logits
    expected = top_k_distribution(logits, 1.5, 20)
    hot = first_token_samples(lm, OPENING, GenerationSettings(1, 1.5, 20, 1.0, 0), seeds)
    counts = np.bincount(hot, minlength=len(expected))
    assert counts[expected == 0].sum() == 0                                # nothing outside the top 20
    assert chi_square_p_value(counts, expected) > 1e-3
    # the test can fail: samples at T=1.0 are rejected against the T=1.5 distribution (and vice versa)
    cold = first_token_samples(lm, OPENING, GenerationSettings(1, 1.0, 20, 1.0, 0), seeds)
    assert chi_square_p_value(np.bincount(cold, minlength=len(expected)), expected) < 1e-6
    assert chi_square_p_value(counts, top_k_distribution(logits, 1.0, 20)) < 1e-6
    # the cheap path is generate's own first step
    for seed in (0, 1, 2, 3):
        assert lm.generate(OPENING, max_new_tokens=1, temperature=1.5, top_k=20, seed=seed).new_token_ids == \
            [hot[seed]]


def test_filters_that_leave_one_token_equal_greedy(lm):
    greedy = lm.generate(CODE, max_new_tokens=10, temperature=0).new_token_ids
    assert lm.generate(CODE, max_new_tokens=10, temperature=1.3, top_k=1, seed=3).new_token_ids == greedy
    assert lm.generate(CODE, max_new_tokens=10, temperature=0.8, top_p=1e-9, seed=4).new_token_ids == greedy
    assert lm.generate(CODE, max_new_tokens=10, temperature=0, top_k=7, top_p=0.5, seed=9).new_token_ids == greedy


def test_end_of_sequence_stops_early(lm, hf_model):
    ids = chat_ids(lm, "Say hi")
    g = lm.generate(ids, max_new_tokens=48, temperature=0)
    assert lm.eos_token_id == hf_model.config.eos_token_id == 2
    assert g.stop_reason == "eos" and g.new_token_ids[-1] == lm.eos_token_id
    assert len(g.steps) < 48 and lm.eos_token_id not in g.new_token_ids[:-1]
    assert g.new_token_ids == hf_greedy(hf_model, ids, 48)                  # transformers stops there too


def test_on_step_reports_progress_and_can_cancel(lm):
    full = lm.generate(OPENING, max_new_tokens=8, temperature=1.0, seed=5)
    seen = []
    g = lm.generate(OPENING, max_new_tokens=8, temperature=1.0, seed=5,
                    on_step=lambda step: seen.append(step.index) or step.index == 2)
    assert seen == [0, 1, 2] and g.stop_reason == "cancelled"
    assert g.new_token_ids == full.new_token_ids[:3]
    streamed = [s.token_id for s in lm.generate_steps(OPENING, max_new_tokens=8, temperature=1.0, seed=5)]
    assert streamed == full.new_token_ids


def test_threads_give_the_sequential_results(lm):
    jobs = [(ENGLISH, dict(temperature=0)), (CODE, dict(temperature=1.0, top_k=50, seed=1)),
            (OPENING, dict(temperature=0.8, top_p=0.9, seed=2))]
    sequential = [lm.generate(prompt, max_new_tokens=8, **kw) for prompt, kw in jobs]
    results = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def work(i):
        barrier.wait()
        results[i] = lm.generate(jobs[i][0], max_new_tokens=8, **jobs[i][1])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for seq, par in zip(sequential, results, strict=True):
        assert par.new_token_ids == seq.new_token_ids
        for a, b in zip(seq.steps, par.steps, strict=True):
            np.testing.assert_allclose(a.attention.astype(np.float32), b.attention.astype(np.float32), atol=1e-3)


def test_long_prompt_keeps_its_end(lm):
    ids = (lm.encode(ENGLISH) * 600)[:lm.config.max_positions]
    text, kept, n_total = prepare_prompt(lm, ids, 32)
    assert n_total == lm.config.max_positions and kept == ids[-(lm.config.max_positions - 32):]


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(max_new_tokens=MAX_NEW_TOKENS + 1), "max_new_tokens"),
    (dict(max_new_tokens=True), "max_new_tokens"), (dict(temperature=0.01), "temperature"),
    (dict(temperature=11.0), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=-1), "top_k"), (dict(top_k=2.5), "top_k"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"),
    (dict(seed=-1), "seed"),
])
def test_bad_settings_raise(lm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        lm.generate("Hello", **kwargs)


@pytest.mark.parametrize("prompt, message", [("", "empty"), ("  \n", "empty"), ([], "empty"),
                                             ([5, 49152], "Token ids")])
def test_bad_prompts_raise(lm, prompt, message):
    with pytest.raises(ValueError, match=message):
        lm.generate(prompt, max_new_tokens=2)


@pytest.mark.parametrize("vocab", [1, 7, 600, 5000, 49152])
def test_top_candidates_are_the_largest_probabilities_by_value_then_id(vocab):
    rng = np.random.default_rng(vocab)
    for logits in (rng.standard_normal(vocab) * 4, np.round(rng.standard_normal(vocab)), np.zeros(vocab)):
        p = softmax64(logits.astype(np.float32))
        n = min(10, vocab)
        expected = np.lexsort((np.arange(vocab), -p))[:n]         # a full sort: by probability, then id
        assert np.array_equal(top_ids(p, n), expected)


@pytest.mark.parametrize("vocab", [3, 1000, 49152])
def test_a_draw_is_the_inverse_cdf_of_one_uniform(vocab):
    rng = np.random.default_rng(vocab)
    p = softmax64(rng.standard_normal(vocab) * 3)
    p[rng.integers(0, vocab, vocab // 3)] = 0.0                               # filtered out: never drawn
    p[np.argmax(p)] += 1e-3
    cdf = np.cumsum(p) / p.sum()                                             # the definition, one cumulative sum
    for u in np.r_[rng.random(300), 0.0, 1 - 2 ** -53]:
        drawn = inverse_cdf(p, float(u))
        assert p[drawn] > 0
        if u < cdf[-1] - 1e-12:
            assert drawn == int(np.searchsorted(cdf, u, side="right"))


@pytest.mark.skipif(not token_choice.available(), reason="no C compiler: numpy's choice only")
@pytest.mark.parametrize("vocab", [3, 10, 1000, 49152])
def test_the_native_token_choice_follows_its_definitions(vocab):
    """TokenChoice against the definitions worked in numpy: the most probable ids by a full sort (probability, then
    id), the entries above 0, the inverse-CDF draw of one cumulative sum, the first maximum for u < 0, the rank."""
    rng = np.random.default_rng(vocab)
    rows = [softmax64(rng.standard_normal(vocab) * 3), softmax64(np.round(rng.standard_normal(vocab))),
            softmax64(rng.standard_normal(vocab) * 300), np.full(vocab, 1.0 / vocab)]
    rows[0][rng.integers(0, vocab, vocab // 3)] = 0.0                                # filtered out: never drawn
    n_top = min(10, vocab)
    choice = token_choice.TokenChoice(rows, n_top)
    for i, p in enumerate(rows):
        assert np.array_equal(choice.top[i], np.lexsort((np.arange(vocab), -p))[:n_top])
        assert choice.positive[i] == np.count_nonzero(p > 0)
    for u in np.r_[rng.random(40), 0.0, 1 - 2 ** -53, -1.0]:
        tokens, ranks = choice.draw([u] * len(rows))
        for p, token, rank in zip(rows, tokens, ranks, strict=True):
            cdf = np.cumsum(p) / p.sum()
            assert p[token] > 0
            if u < 0:
                assert token == np.argmax(p)
            elif u < cdf[-1] - 1e-12:
                assert token == int(np.searchsorted(cdf, u, side="right"))
            assert rank == np.count_nonzero(p > p[token]) + np.count_nonzero(p[:token] == p[token])


@pytest.mark.skipif(not token_choice.available(), reason="no C compiler: numpy's choice only")
def test_a_batch_chosen_natively_gets_numpys_steps_and_uses_the_same_randomness(lm):
    """choose_steps (rows without top-k / top-p surveyed and drawn natively) against next_token_distribution,
    choose_token and record_step row by row: the same token, candidates, probabilities, rank and kept count, and
    each generator left in the same state (a one-hot distribution draws no uniform)."""
    rng = np.random.default_rng(7)
    settings = [GenerationSettings(temperature=0), GenerationSettings(temperature=1.0, seed=1),
                GenerationSettings(temperature=0.7, seed=2), GenerationSettings(temperature=0.05, seed=3),
                GenerationSettings(temperature=1.3, top_k=20, seed=4), GenerationSettings(temperature=2.0, seed=5)]
    for spread in (3.0, 40.0):
        logits = (rng.standard_normal((len(settings), lm.config.vocab_size)) * spread).astype(np.float32)
        logits[0, 5] = logits[0, 9] = logits[0].max() + 1                           # a tie for the greedy row
        generators = [np.random.default_rng(i) for i in range(len(settings))]
        references = [np.random.default_rng(i) for i in range(len(settings))]
        rows = [np.zeros((2, 3, 4), np.float16) for _ in settings]
        steps = choose_steps(lm, [3] * len(settings), logits, settings, generators, rows, SoftmaxWorkspace())
        for b, (step, s) in enumerate(zip(steps, settings, strict=True)):
            dist = next_token_distribution(logits[b], s)
            want = record_step(lm, 3, choose_token(dist, references[b]), dist, np.zeros((2, 3, 4), np.float16))
            assert (step.index, step.token_id, step.token, step.rank, step.n_kept) == \
                (want.index, want.token_id, want.token, want.rank, want.n_kept)
            assert (step.prob, step.temperature_prob, step.raw_prob, step.entropy_bits) == \
                (want.prob, want.temperature_prob, want.raw_prob, want.entropy_bits)
            for name in ("ids", "probs", "raw_probs", "kept", "sampling_probs"):
                assert np.array_equal(getattr(step.candidates, name), getattr(want.candidates, name)), name
            assert step.candidates.tokens == want.candidates.tokens
            assert generators[b].random() == references[b].random()
