"""lm.occlusion and lm.gradient_x_input against transformers on the same weights (float64): every occluded text run
by transformers, and autograd on transformers' inputs_embeds."""
import numpy as np
import pytest

from model.analysis.input_attribution import occlusion_token
from tests.model.circuits_reference import ARCH_CASES, TinyModels, gradient_x_input_by_autograd, occlusion_by_runs

TEXT = "The old man sat on the mat because he was good, and then the"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return TinyModels(tmp_path_factory.mktemp("attribution"))


@pytest.mark.parametrize("arch", list(ARCH_CASES))
def test_occlusion_and_gradients_equal_transformers(tiny, arch):
    lm, hf = tiny[arch]
    ids = lm.encode(TEXT)
    target = int(np.argmax(lm.run_ids(ids).next_token_logits))
    occluded = lm.occlusion(TEXT)                                                  # default target: the top token
    expected = occlusion_by_runs(hf, ids, target, occlusion_token(lm))
    np.testing.assert_allclose(occluded, expected, atol=1e-3, rtol=0)
    assert np.abs(expected).max() > 0.05
    gradients = lm.gradient_x_input(TEXT)
    expected = gradient_x_input_by_autograd(hf, ids, target)
    scale = float(np.abs(expected).max())
    assert scale > 0.01                                                          # the check can see a gradient
    np.testing.assert_allclose(gradients, expected, atol=1e-3 * scale, rtol=0)


def test_chosen_target_replacement_and_bad_arguments(tiny):
    lm, hf = tiny["gpt2"]
    ids = lm.encode(TEXT)
    ours = lm.occlusion(ids, target=" man", replacement=" mat")
    expected = occlusion_by_runs(hf, ids, lm.encode(" man")[0], lm.encode(" mat")[0])
    np.testing.assert_allclose(ours, expected, atol=1e-3, rtol=0)
    np.testing.assert_allclose(lm.gradient_x_input(ids, target=" man"),
                               gradient_x_input_by_autograd(hf, ids, lm.encode(" man")[0]), atol=1e-3, rtol=0)
    assert occlusion_token(lm) == lm.encode(" ")[0]
    for call in (lambda: lm.occlusion(TEXT, target=" two words"), lambda: lm.occlusion(""),
                 lambda: lm.gradient_x_input([]), lambda: lm.occlusion(TEXT, replacement=-1),
                 lambda: lm.gradient_x_input(TEXT, target=lm.config.vocab_size)):
        with pytest.raises(ValueError):
            call()


def test_the_built_in_model_on_the_indirect_object_sentence(hf_model):
    """SmolLM2 (float32 transformers as the reference): the name the model must repeat matters."""
    from model import load_model

    lm = load_model()
    text = "When Mary and John went to the store, John gave a drink to"
    ids = lm.encode(text)
    target = lm.encode(" Mary")[0]
    occluded = lm.occlusion(text, target=target)
    np.testing.assert_allclose(occluded, occlusion_by_runs(hf_model, ids, target, occlusion_token(lm)), atol=1e-3,
                               rtol=0)
    # before the last token (which any replacement ruins), occluding Mary hurts most
    assert int(np.argmin(occluded[:-1])) == ids.index(lm.encode(" Mary")[0])
    expected = gradient_x_input_by_autograd(hf_model, ids, target)
    np.testing.assert_allclose(lm.gradient_x_input(text, target=target), expected,
                               atol=1e-3 * float(np.abs(expected).max()), rtol=0)


def test_a_model_kept_quantized(tmp_path):
    """Matrices kept quantized (as large models are): the batched forward multiplies them as they are, autograd
    through their dequantized values; both still equal transformers on the file's numbers."""
    import copy

    from harness.tiny_gguf import Tiny, write_tiny
    from model import load_model
    from model.decoder.matrices import QuantizedMatrix
    from tests.model.circuits_reference import patching_by_hooks

    path = tmp_path / "q8.gguf"
    hf = copy.deepcopy(write_tiny(path, Tiny(arch="qwen2", quant="Q8_0", d_model=256, n_heads=4, n_kv_heads=2,
                                             d_ff=512))).double()
    lm = load_model(path=path, keep_quantized=True)
    assert isinstance(lm.blocks[0].mlp.w_down, QuantizedMatrix)
    ids = lm.encode(TEXT)
    target = int(np.argmax(lm.run_ids(ids).next_token_logits))
    expected = gradient_x_input_by_autograd(hf, ids, target)
    np.testing.assert_allclose(lm.gradient_x_input(ids, target), expected, atol=1e-3 * np.abs(expected).max(), rtol=0)
    corrupt = lm.encode(TEXT.replace(" he ", " she "))
    foil = int(np.argmax(lm.run_ids(corrupt).next_token_logits))
    if foil == target:
        foil = int(np.argsort(lm.run_ids(ids).next_token_logits)[-2])
    np.testing.assert_allclose(lm.activation_patching(ids, corrupt, target, foil, "head"),
                               patching_by_hooks(hf, ids, corrupt, target, foil, "head"), atol=1e-3, rtol=0)
