"""Odd and hostile input: clear errors or a normal run, never a crash."""
import numpy as np
import pytest

ODD_TEXTS = {
    "control": "tab\there, bell\x07, nul\x00, escape\x1b[31m red",
    "emoji": "👩‍👩‍👧‍👦 🏳️‍🌈 🙂🙂🙂",
    "rtl": "\u202eabc\u202c مرحبا بالعالم שלום עולם",
    "zero_width": "zero\u200bwidth\u200c\u200djoiner\ufeff",
    "untokenizable": "\x04\x06 bytes \x13\x14\x16\x1d and \U00040000\U000bffff",
}


@pytest.mark.parametrize("name", sorted(ODD_TEXTS))
def test_odd_text_runs(lm, name):
    trace = lm.run(ODD_TEXTS[name])
    assert trace.n_tokens == len(trace.tokens) == trace.attention.shape[-1] > 0
    assert np.isfinite(trace.next_token_logits).all()
    assert np.isfinite(trace.attention).all()


@pytest.mark.parametrize("text", ["", "   ", "\n\t \n"])
def test_empty_text_has_a_clear_message(lm, text):
    with pytest.raises(ValueError, match="empty"):
        lm.run(text)


def test_only_untokenizable_bytes(lm):
    with pytest.raises(ValueError, match="no tokens"):
        lm.run("\x04\x06")


def test_long_text_is_truncated(lm):
    text = "word " * 600
    trace = lm.run(text, max_tokens=100)
    assert trace.truncated and trace.n_tokens == 100 and trace.n_tokens_total == len(lm.encode(text))
    assert not lm.run("short text", max_tokens=100).truncated


@pytest.mark.parametrize("bad", [0, -1, 8193, 2.5, "10", True])
def test_max_tokens_outside_range(lm, bad):
    with pytest.raises(ValueError, match="from 1 to 8192"):
        lm.run("hello", max_tokens=bad)


def test_max_tokens_none_means_the_default_512(lm):
    text = "word " * 600
    trace = lm.run(text, max_tokens=None)
    assert trace.truncated and trace.n_tokens == 512


def test_concurrent_runs_agree(lm):
    from concurrent.futures import ThreadPoolExecutor

    texts = ["The cat sat on the mat.", "def f(x): return x", "Paris is the capital of France."] * 2
    alone = [lm.run(t).next_token_logits for t in texts]
    with ThreadPoolExecutor(max_workers=3) as pool:
        together = list(pool.map(lambda t: lm.run(t).next_token_logits, texts))
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)
