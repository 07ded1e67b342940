"""Computed answers against independent computations: transformers on the same GGUF weights and its tokenizer (next
token, the token a head attends to most: both the visible ones, as the reference tokenizer decodes them; the number
of tokens, the model's parameter count) and the published parameter counts."""
from __future__ import annotations

import pytest
import torch

from app_core.lessons import computed_answer
from app_core.lessons.questions import Question

TEXT = "The keys that the old man had left on the kitchen table were gone, so he searched the whole house for them."
WORDS = {"en": "q", "zh": "问"}


def question(**fields) -> Question:
    return Question(ask=WORDS, why=WORDS, **fields)


@pytest.fixture(scope="module")
def reference(hf_model):
    """transformers' model (the session's, tests/conftest.py) and tokenizer of the default GGUF file (float32, eager
    attention)."""
    import transformers

    from model.files.gguf import default_model_path

    path = default_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return hf_model, tokenizer


@pytest.fixture(scope="module")
def trace(lm):
    return lm.run(TEXT)


@pytest.fixture(scope="module")
def outputs(reference, trace):
    model, _ = reference
    with torch.no_grad():
        return model(torch.tensor([trace.token_ids]), output_attentions=True)


def test_the_number_of_tokens_is_the_reference_tokenizer_s(lm, reference, trace):
    _, tokenizer = reference
    answer = computed_answer(question(kind="number", compute="n_tokens"), lm, trace)
    assert answer.value == len(tokenizer(TEXT, add_special_tokens=False)["input_ids"])


def visible(tokenizer, token_id: int) -> bool:
    """The reference tokenizer's view: a token that decodes to text a student can see (no lone byte, not only
    whitespace, not a special token)."""
    text = tokenizer.decode([token_id])
    return token_id not in tokenizer.all_special_ids and bool(text.strip()) and "\ufffd" not in text


@pytest.mark.parametrize("text", [TEXT, "The cat sat on the mat.", "Sequence: lantern cobalt. Again: lantern",
                                  "模型并不直接读文字：分词器先把句子切成"])
def test_the_next_token_is_transformers_top_visible_token(lm, reference, text):
    model, tokenizer = reference
    trace = lm.run(text)
    with torch.no_grad():
        logits = model(torch.tensor([trace.token_ids])).logits[0, -1]
    expected = next(int(i) for i in torch.argsort(logits, descending=True) if visible(tokenizer, int(i)))
    answer = computed_answer(question(kind="token", compute="next_token"), lm, trace)
    assert answer.value == tokenizer.decode([expected]) and answer.shown == lm.token_strings([expected])[0]


@pytest.mark.parametrize("layer, head, position, without_sink", [
    (3, 1, -1, True), (0, 0, 5, False), (14, 7, -2, True), (29, 8, 10, True), (12, 4, -1, False)])
def test_the_most_attended_token_is_transformers(lm, reference, outputs, trace, layer, head, position,
                                                 without_sink):
    answer = computed_answer(question(kind="token", compute="top_attended", layer=layer, head=head,
                                      position=position, without_sink=without_sink), lm, trace)
    _, tokenizer = reference
    row = outputs.attentions[layer][0, head, position].numpy()          # [T]
    allowed = [visible(tokenizer, t) and not (without_sink and i == 0) for i, t in enumerate(trace.token_ids)]
    last = position % len(row)
    key = max((i for i in range(last + 1) if allowed[i]), key=lambda i: row[i])
    assert answer.shown == lm.token_strings([trace.token_ids[key]])[0]


def test_the_model_s_parameter_count_is_the_sum_of_its_tensors(lm, reference):
    model, _ = reference
    answer = computed_answer(question(kind="number", compute="param_count", preset="model"), lm)
    assert answer.value == sum(p.numel() for p in model.parameters()) == 134_515_008    # tied head counted once


@pytest.mark.parametrize("preset, published", [("GPT-2 small", 124_439_808), ("Llama-2-7B", 6_738_415_616)])
def test_preset_counts_are_the_published_ones(preset, published):
    answer = computed_answer(question(kind="number", compute="param_count", preset=preset))
    assert answer.value == published and answer.shown == f"{published:,}"
