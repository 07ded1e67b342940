"""Train the app's two built-in demo models and write them as GGUF files (llama.cpp's converter layout, through
harness/tiny_encoders.py's writers) under assets/models/:

- tiny-t5-reverse.gguf: a tiny T5 trained to write its source's tokens in reverse order, so its cross-attention
  draws the classic alignment (an anti-diagonal: to write the source's last token it looks at it, then at the one
  before...). It reverses any sequence of its vocabulary's pieces, by content: to write the next token, look for the
  source token just left of the one it wrote last.
- tiny-bert-mlm.gguf: a tiny BERT trained briefly as a masked language model on the app's example texts (a GGUF has
  no masked-word head: llama.cpp's converter drops it; its attention is what the app shows).

Both vocabularies are trained here: a SentencePiece unigram model on the example texts (assets/examples.json) and the
READMEs for the T5, a WordPiece vocabulary on the example texts for the BERT. Fixed seeds, one thread: the same
files every run on one machine.
A few CPU minutes: python -m tools.train_demo_models [--steps-t5 N] [--steps-bert N] [--only t5|bert]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from harness.tiny_encoders import (
    BERT_SPECIALS,
    T5_EXTRA_IDS,
    T5_PAD_ROWS,
    unigram_model,
    unigram_vocab,
    wordpiece_vocab,
    write_bert_model,
    write_t5_model,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "assets" / "models"
T5_FILE, BERT_FILE = "tiny-t5-reverse.gguf", "tiny-bert-mlm.gguf"
T5_PIECES = 1000              # unigram pieces (whole words for the common ones; every character of the texts)
MAX_LEN = 32                  # the T5's sources in training: 1..MAX_LEN pieces
REAL_TEXT = 0.5               # the share of training sources that are windows of real text (repeated pieces)
BERT_WINDOW = 46              # the BERT's texts in training: windows of at most this many tokens
SEED = 1234


def corpus() -> list[str]:
    """The example texts' lines (English, Chinese, code, French): what the demo BERT reads."""
    examples = json.loads((ROOT / "assets" / "examples.json").read_text(encoding="utf-8"))
    return [line.strip() for e in examples for line in e["text"].splitlines() if line.strip()]


def t5_corpus() -> list[str]:
    """The examples and the READMEs (English and Chinese): the demo T5's vocabulary and its real texts."""
    readmes = [(ROOT / name).read_text(encoding="utf-8") for name in ("README.md", "README.zh-CN.md")]
    return corpus() + [line.strip() for text in readmes for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------------------- T5

def t5_model(vocab_size: int, pad: int, eos: int):
    import transformers

    config = transformers.T5Config(vocab_size=vocab_size, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                   num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=32,
                                   relative_attention_max_distance=128, feed_forward_proj="relu",
                                   layer_norm_epsilon=1e-6, decoder_start_token_id=pad, pad_token_id=pad,
                                   eos_token_id=eos, tie_word_embeddings=True, attn_implementation="eager")
    return transformers.T5ForConditionalGeneration(config)


def reverse_batch(rng: np.random.Generator, pieces: np.ndarray, texts: list[list[int]], batch: int, pad: int,
                  eos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(source ids, labels): a batch of piece sequences (random pieces, or a window of a real text) and their
    reversal, each ending in </s>; padding: pad in the source, -100 in the labels."""
    sources = []
    for _ in range(batch):
        n = int(rng.integers(1, MAX_LEN + 1))
        if rng.random() < REAL_TEXT:
            text = texts[int(rng.integers(len(texts)))]
            start = int(rng.integers(max(1, len(text) - n + 1)))
            sources.append(text[start:start + n])
        else:
            sources.append([int(p) for p in rng.choice(pieces, size=n)])
    width = max(len(s) for s in sources) + 1
    src = torch.full((batch, width), pad, dtype=torch.long)
    labels = torch.full((batch, width), -100, dtype=torch.long)
    for i, s in enumerate(sources):
        src[i, :len(s) + 1] = torch.tensor([*s, eos])
        labels[i, :len(s) + 1] = torch.tensor([*s[::-1], eos])
    return src, labels


def train_t5(steps: int) -> tuple[object, dict, float]:
    """The reversing T5, its vocabulary metadata and its exact-match rate on new random sequences."""
    import sentencepiece as spm

    lines = t5_corpus()
    proto = unigram_model(lines, T5_PIECES, coverage=1.0)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    meta = unigram_vocab(proto, T5_PIECES + T5_EXTRA_IDS + T5_PAD_ROWS)     # <extra_id_N>, rows past the pieces
    pad, eos = meta["pad"], meta["eos"]
    pieces = np.array([i for i in range(sp.vocab_size()) if not (sp.is_control(i) or sp.is_unknown(i))])
    texts = [ids for ids in (sp.encode(line) for line in lines) if ids]
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = t5_model(len(meta["tokens"]), pad, eos)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    model.train()
    for step in range(steps):
        src, labels = reverse_batch(rng, pieces, texts, 64, pad, eos)
        loss = model(input_ids=src, attention_mask=(src != pad).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 250 == 0 or step == steps - 1:
            print(f"t5 step {step:5d}  loss {loss.item():.4f}", flush=True)
    model.eval()
    src, labels = reverse_batch(np.random.default_rng(SEED + 1), pieces, texts, 200, pad, eos)
    with torch.no_grad():
        out = model.generate(input_ids=src, attention_mask=(src != pad).long(), max_new_tokens=MAX_LEN + 2,
                             do_sample=False, num_beams=1)
    exact = np.mean([out[i, 1:][:int((labels[i] != -100).sum())].tolist() == labels[i][labels[i] != -100].tolist()
                     for i in range(len(src))])
    return model, meta, float(exact)


# ------------------------------------------------------------------------------------------------------- BERT

def window(ids: list[int], rng: np.random.Generator, specials: dict[str, int]) -> list[int]:
    """[CLS], a window of at most BERT_WINDOW of a text's token ids, [SEP]."""
    start = int(rng.integers(max(1, len(ids) - BERT_WINDOW + 1)))
    return [specials["[CLS]"], *ids[start:start + BERT_WINDOW], specials["[SEP]"]]


def train_bert(steps: int) -> tuple[object, list[str], float]:
    """The masked-LM-trained BERT (its encoder), its vocabulary and the masked tokens' accuracy in training's
    last 50 steps."""
    import transformers
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    lines = corpus()
    vocab = wordpiece_vocab(True, lines, min_count=1)
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    ids = {s: vocab.index(s) for s in BERT_SPECIALS}
    texts = [tok.encode(line).ids for line in lines]
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=64, num_hidden_layers=4,
                                     num_attention_heads=4, intermediate_size=128, max_position_embeddings=128,
                                     type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12,
                                     attn_implementation="eager")
    model = transformers.BertForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    hits = []
    model.train()
    for step in range(steps):
        chosen = [window(texts[int(i)], rng, ids) for i in rng.integers(len(texts), size=32)]
        width = max(len(t) for t in chosen)
        x = torch.full((len(chosen), width), ids["[PAD]"], dtype=torch.long)
        for i, t in enumerate(chosen):
            x[i, :len(t)] = torch.tensor(t)
        inner = (x != ids["[PAD]"]) & (x != ids["[CLS]"]) & (x != ids["[SEP]"])
        masked = inner & torch.from_numpy(rng.random(x.shape) < 0.15)
        labels = torch.where(masked, x, torch.full_like(x, -100))
        inputs = torch.where(masked, torch.full_like(x, ids["[MASK]"]), x)
        out = model(input_ids=inputs, attention_mask=(x != ids["[PAD]"]).long(), labels=labels)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        schedule.step()
        if step >= steps - 50 and masked.any():
            hits.append(float((out.logits.argmax(-1)[masked] == x[masked]).float().mean()))
        if step % 250 == 0 or step == steps - 1:
            print(f"bert step {step:5d}  loss {out.loss.item():.4f}", flush=True)
    return model.bert.eval(), vocab, float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps-t5", type=int, default=3000)
    parser.add_argument("--steps-bert", type=int, default=1500)
    parser.add_argument("--only", choices=("t5", "bert"), help="train and write one of the two")
    args = parser.parse_args()
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.only != "bert":
        t5_demo(args.steps_t5)
    if args.only != "t5":
        bert_demo(args.steps_bert)


def t5_demo(steps: int) -> None:
    start = time.perf_counter()
    t5, meta, exact = train_t5(steps)
    write_t5_model(OUT / T5_FILE, t5, meta, "Q8_0", tied_head_in_file=True, name="tiny T5 (trained to reverse)")
    print(f"{T5_FILE}: {(OUT / T5_FILE).stat().st_size:,} bytes; reverses {exact:.0%} of 200 new sequences exactly; "
          f"{time.perf_counter() - start:.0f} s", flush=True)


def bert_demo(steps: int) -> None:
    start = time.perf_counter()
    bert, vocab, accuracy = train_bert(steps)
    write_bert_model(OUT / BERT_FILE, bert, vocab, "F16", pooling=1, name="tiny BERT (masked LM, briefly trained)")
    print(f"{BERT_FILE}: {(OUT / BERT_FILE).stat().st_size:,} bytes; masked tokens right {accuracy:.0%} (last 50 "
          f"training steps); {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
