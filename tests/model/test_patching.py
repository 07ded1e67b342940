"""lm.activation_patching against transformers with forward hooks on the same weights (float64), every
architecture; the built-in model on the indirect-object pair."""
import numpy as np
import pytest

from tests.model.circuits_reference import ARCH_CASES, TinyModels, logit_difference, patching_by_hooks

CLEAN = "The old man sat on the mat because he was good, and then the"
CORRUPT = "The old man sat on the mat because she was good, and then the"     # one token differs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return TinyModels(tmp_path_factory.mktemp("patching"))


def answer_and_foil(lm, hf):
    """The clean run's top token and the corrupt run's: a pair whose logit difference the texts change."""
    clean, corrupt = lm.encode(CLEAN), lm.encode(CORRUPT)
    answer = int(np.argmax(lm.run_ids(clean).next_token_logits))
    foil = int(np.argmax(lm.run_ids(corrupt).next_token_logits))
    if foil == answer:
        foil = int(np.argsort(lm.run_ids(clean).next_token_logits)[-2])
    gap = logit_difference(hf, clean, answer, foil) - logit_difference(hf, corrupt, answer, foil)
    assert abs(gap) > 0.1, "the texts barely change the logit difference: the ratio would be ill-conditioned"
    return answer, foil


@pytest.mark.parametrize("arch", list(ARCH_CASES))
@pytest.mark.parametrize("kind", ["resid", "head"])
def test_patching_equals_transformers_with_hooks(tiny, arch, kind):
    lm, hf = tiny[arch]
    answer, foil = answer_and_foil(lm, hf)
    ours = lm.activation_patching(CLEAN, CORRUPT, answer, foil, kind)
    expected = patching_by_hooks(hf, lm.encode(CLEAN), lm.encode(CORRUPT), answer, foil, kind)
    T = len(lm.encode(CLEAN))
    assert ours.shape == ((lm.config.n_layers, T) if kind == "resid" else (lm.config.n_layers, lm.config.n_heads))
    np.testing.assert_allclose(ours, expected, atol=1e-3, rtol=0)
    assert np.abs(expected).max() > 0.05                                         # the check can see an effect


@pytest.mark.parametrize("kind", ["resid", "head"])
def test_a_pair_differing_at_the_first_token(tiny, kind):
    """No shared prefix: the patched runs hold every position."""
    lm, hf = tiny["qwen3"]
    clean, corrupt = (lm.encode(f"{word} old man sat on the mat, and the") for word in ("The", "It"))
    assert len(clean) == len(corrupt) and clean[0] != corrupt[0] and clean[1:] == corrupt[1:]
    answer = int(np.argmax(lm.run_ids(clean).next_token_logits))
    foil = int(np.argmax(lm.run_ids(corrupt).next_token_logits))
    ours = lm.activation_patching(clean, corrupt, answer, foil, kind)
    np.testing.assert_allclose(ours, patching_by_hooks(hf, clean, corrupt, answer, foil, kind), atol=1e-3, rtol=0)


def test_whole_stream_facts(tiny):
    """Patching the stream entering layer 0 at the one differing position restores the clean run exactly, and
    positions before it change nothing (the model is causal)."""
    lm, hf = tiny["qwen2"]
    answer, foil = answer_and_foil(lm, hf)
    effects = lm.activation_patching(CLEAN, CORRUPT, answer, foil, "resid")
    differing = [p for p, (a, b) in enumerate(zip(lm.encode(CLEAN), lm.encode(CORRUPT), strict=True)) if a != b]
    assert len(differing) == 1 and effects[0, differing[0]] == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_array_equal(effects[:, :differing[0]], 0.0)


def test_token_strings_and_bad_arguments(tiny):
    lm, hf = tiny["llama"]
    answer, foil = answer_and_foil(lm, hf)
    by_id = lm.activation_patching(CLEAN, CORRUPT, answer, foil, "head")
    by_text = lm.activation_patching(CLEAN, CORRUPT, lm.decode([answer]), lm.decode([foil]), "head")
    np.testing.assert_array_equal(by_id, by_text)
    bad = [(CLEAN, CORRUPT + " again", answer, foil, "resid"),         # lengths differ
           (CLEAN, CORRUPT, " a word too long for one token", foil, "resid"),
           (CLEAN, CORRUPT, answer, lm.config.vocab_size, "head"),
           (CLEAN, CORRUPT, answer, answer, "head"),
           (CLEAN, CLEAN, answer, foil, "head"),                        # nothing to restore
           (CLEAN, CORRUPT, answer, foil, "mlp"),
           ("", "", answer, foil, "resid")]
    for args in bad:
        with pytest.raises(ValueError):
            lm.activation_patching(*args)
