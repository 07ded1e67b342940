"""lm.head_role_scores against the issue's formulas looped over transformers' attention on the same weights."""
import numpy as np
import pytest

from model.analysis.head_roles import PROBE_TOKENS, ROLES
from tests.model.circuits_reference import ARCH_CASES, TinyModels, attentions, role_scores_by_loop

TEXT = "The cat sat on the mat. The cat sat on the mat, and the dog sat on the cat."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return TinyModels(tmp_path_factory.mktemp("head_roles"))


@pytest.mark.parametrize("arch", list(ARCH_CASES))
def test_scores_on_the_probe_and_a_text_equal_the_formulas_on_transformers(tiny, arch):
    lm, hf = tiny[arch]
    for ids in (lm.head_role_probe(), lm.encode(TEXT)):
        scores = lm.head_role_scores(ids)
        expected = role_scores_by_loop(attentions(hf, ids), ids)
        assert set(scores) == set(ROLES)
        for role in ROLES:
            assert scores[role].shape == (lm.config.n_layers, lm.config.n_heads)
            np.testing.assert_allclose(scores[role], expected[role], atol=1e-3, rtol=0, err_msg=role)


def test_the_default_probe_is_random_ordinary_tokens_twice(tiny):
    lm, _ = tiny["llama"]
    probe = lm.head_role_probe()
    assert probe == lm.head_role_probe()                                         # fixed seed
    assert len(probe) == 2 * PROBE_TOKENS and probe[:PROBE_TOKENS] == probe[PROBE_TOKENS:]
    assert len(set(probe)) == PROBE_TOKENS and not set(probe) & lm.tokenizer.special_ids
    scores = lm.head_role_scores()
    np.testing.assert_array_equal(scores["induction"], lm.head_role_scores(probe)["induction"])


def test_roles_without_repeats_are_undefined_and_bad_tokens_are_refused(tiny):
    lm, _ = tiny["gpt2"]
    scores = lm.head_role_scores([300, 301, 302])
    assert np.isnan(scores["induction"]).all() and np.isnan(scores["duplicate_token"]).all()
    assert np.isfinite(scores["previous_token"]).all()
    one = lm.head_role_scores([300])
    assert all(np.isnan(one[role]).all() for role in ROLES)
    for bad in ([], [lm.config.vocab_size], ["a"], [True]):
        with pytest.raises(ValueError):
            lm.head_role_scores(bad)


def test_the_built_in_model_has_the_heads_the_course_names(hf_model):
    """SmolLM2 on its probe: the scores equal the formulas on transformers, and the model has strong
    previous-token, induction and sink heads (the lessons point at them)."""
    from model import load_model

    lm = load_model()
    ids = lm.head_role_probe()
    scores = lm.head_role_scores(ids)
    expected = role_scores_by_loop(attentions(hf_model, ids), ids)
    for role in ROLES:
        np.testing.assert_allclose(scores[role], expected[role], atol=1e-3, rtol=0, err_msg=role)
    assert scores["previous_token"].max() > 0.8 and scores["induction"].max() > 0.8 and scores["sink"].max() > 0.9


def test_attention_difference_of_a_pair_by_hand():
    from model.analysis.pair_attention import attention_difference

    a = np.zeros((1, 2, 3, 3))
    b = np.zeros((1, 2, 3, 3))
    a[..., 0, 0] = b[..., 0, 0] = 1
    a[0, 0, 1, :2], b[0, 0, 1, :2] = (0.5, 0.5), (0.9, 0.1)        # TV distance 0.4
    a[0, 0, 2], b[0, 0, 2] = (0.2, 0.3, 0.5), (0.2, 0.3, 0.5)      # 0
    a[0, 1, 1, :2], b[0, 1, 1, :2] = (1, 0), (0, 1)                # 1
    a[0, 1, 2], b[0, 1, 2] = (0, 0, 1), (0.5, 0, 0.5)              # 0.5
    np.testing.assert_allclose(attention_difference(a, b), [[0.4 / 3, 1.5 / 3]])
    np.testing.assert_allclose(attention_difference(a, b, start=1), [[0.2, 0.75]])
    with pytest.raises(ValueError):
        attention_difference(a, b[..., :2, :2])
