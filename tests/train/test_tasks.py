"""Every task produces what it claims, deterministically from its generator."""
import torch

from model.train.settings import TrainSettings
from model.train.tasks import make_task, probe_batch

TEXT = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
        "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it "
        "was the season of Darkness, it was the spring of hope, it was the winter of despair, we had everything "
        "before us, we had nothing before us, we were all going direct to Heaven, we were all going direct the "
        "other way. ") * 2


def _batch(task_name: str, seed: int = 0, n: int = 256, **settings):
    task = make_task(TrainSettings(task=task_name, **settings))
    return task, task.sample(torch.Generator().manual_seed(seed), n)


def test_induction_repeats_a_segment_and_marks_exactly_its_second_copy_after_the_first_token():
    task, batch = _batch("induction", seq_len=48, vocab_size=40)
    T = 48
    lengths, distances = set(), set()
    for tokens, mask in zip(batch.tokens.tolist(), batch.predictable.tolist(), strict=True):
        marked = [t for t in range(T) if mask[t]]
        first, last = marked[0], marked[-1]
        assert marked == list(range(first, last + 1))                  # one contiguous run
        start = first - 1                                              # the second copy starts one before
        length = last - start + 1
        assert 48 // 6 <= length <= 48 // 3
        # an earlier, non-overlapping copy of the whole segment exists
        found = [d for d in range(length, start + 1) if tokens[start - d:start - d + length] == tokens[start:last + 1]]
        assert found, (tokens, marked)
        lengths.add(length)
        distances.add(found[-1])
    assert len(lengths) >= 5 and len(distances) >= 15                  # no single offset finds the copy
    assert batch.tokens.min() >= 0 and batch.tokens.max() < 40


def test_induction_source_points_at_the_copied_token():
    _, batch = _batch("induction")
    b, t = batch.predictable.nonzero(as_tuple=True)
    src = batch.source[b, t]
    assert torch.all(src < t - 1)
    assert torch.equal(batch.tokens[b, src], batch.tokens[b, t])
    assert torch.equal(batch.tokens[b, src - 1], batch.tokens[b, t - 1])


def test_batches_are_deterministic_from_the_generator():
    _, a = _batch("induction", seed=3)
    _, b = _batch("induction", seed=3)
    _, c = _batch("induction", seed=4)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.predictable, b.predictable)
    assert not torch.equal(a.tokens, c.tokens)


def test_copy_and_sort_answer_after_the_separator():
    for name, answer in (("copy", lambda x: x), ("sort", sorted)):
        task, batch = _batch(name, n=16, seq_len=21, vocab_size=20)
        n = 10
        assert batch.tokens.shape == (16, 2 * n + 1)
        assert task.labels[19] == "|" and torch.all(batch.tokens[:, n] == 19)
        for tokens, mask in zip(batch.tokens.tolist(), batch.predictable.tolist(), strict=True):
            assert tokens[n + 1:] == answer(tokens[:n])
            assert 19 not in tokens[:n]
            assert mask == [False] * (n + 1) + [True] * n


def test_modular_addition_sums_and_holds_out_half_of_all_pairs():
    task = make_task(TrainSettings(task="modadd", vocab_size=40))
    p = 37                                                             # the largest prime <= 40 - 2
    assert task.labels[:p] == tuple(str(i) for i in range(p)) and task.labels[p:] == ("+", "=")
    held = task.held_out()
    train = task.sample(torch.Generator().manual_seed(0), 4000)
    for batch in (held, train):
        a, plus, b, equals, c = batch.tokens.T
        assert torch.all(plus == p) and torch.all(equals == p + 1) and torch.equal(c, (a + b) % p)
        assert batch.predictable.tolist() == [[False, False, False, False, True]] * len(batch.tokens)
    def pairs(batch):
        return {(int(a), int(b)) for a, _, b, _, _ in batch.tokens}
    assert len(pairs(held)) == p * p - p * p // 2
    assert not pairs(held) & pairs(train)                              # a held-out sum is never trained on


def test_text_windows_come_from_the_text_and_the_held_out_tail_is_not_trained_on():
    task = make_task(TrainSettings(task="text", text=TEXT, seq_len=32))
    assert "".join(task.labels) == "".join(sorted(set(TEXT)))

    def decode(row):
        return "".join(task.labels[i] for i in row)

    tail = len(TEXT) - max(len(TEXT) // 10, 33)
    for row in task.sample(torch.Generator().manual_seed(0), 64).tokens.tolist():
        assert decode(row) in TEXT[:tail]
    held = task.held_out()
    for row in held.tokens.tolist():
        assert decode(row) in TEXT[tail:]
    assert held.predictable[:, 0].sum() == 0 and held.predictable[:, 1:].all()


def test_the_probe_is_induction_data_over_the_tasks_vocabulary():
    task = make_task(TrainSettings(task="sort", vocab_size=20, seq_len=21))
    probe = probe_batch(task, task.held_out())
    assert probe.tokens.shape[1] == task.seq_len and probe.tokens.max() < task.vocab_size
    assert probe.source is not None and probe.predictable.any()
    induction = make_task(TrainSettings())
    held = induction.held_out()
    assert probe_batch(induction, held) is held                             # measured on its own held-out data


def test_symbols_have_one_character_names_in_sorting_order():
    names = make_task(TrainSettings(task="induction", vocab_size=110)).labels
    assert len(set(names)) == 110 and all(len(n) == 1 for n in names)
    assert list(names) == sorted(names)                                # sort's answers read in order
