"""Greedy generation sanity on the real model."""


def test_capital_of_france_is_paris(lm):
    assert lm.generate("The capital of France is", n_new_tokens=1) == " Paris"


def test_top_prediction_in_trace_matches_generation(lm):
    trace = lm.run("One, two, three, four,")
    assert lm.decode([int(trace.next_token_logits.argmax())]) == " five"
