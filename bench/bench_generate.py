"""Speed of generation (model/generation.py) against transformers' generate on the same GGUF.

Measures, as the median of --runs runs after one warm-up:
- ours: lm.generate on a 64-token prompt, 64 new tokens, attention rows and candidates recorded (greedy, and
  sampled with temperature 1.0, top-k 50, top-p 0.9); new tokens per second and milliseconds to the first token;
- where the time goes: the KV-cached forward alone (IncrementalDecoder.feed: the prompt, then one token per step),
  and the rest of a step (softmax, filtering, sampling, top-10 candidates), as total minus forward;
- the choice of BLAS: one step's 120 weight matrix-vector products through numpy (OpenBLAS, what generation uses)
  and through torch's F.linear (MKL);
- transformers: model.generate(do_sample=False, output_attentions=True, return_dict_in_generate=True) with its
  KV cache, eager attention, float32, the same prompt ids; the ratio ours / transformers in tokens per second.
Both stop at exactly 64 new tokens (transformers gets min_new_tokens; the prompt does not reach end-of-sequence).
Usage (from the repository root): python -m bench.bench_generate [--runs 5] [--no-reference]
"""
from __future__ import annotations

import argparse
import statistics
import time

PROMPT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined "
          "movable metal type, oil-based ink and a wooden press adapted from winemaking to produce books that were "
          "cheaper and more uniform than anything copied by hand. Within fifty years, presses had spread")
PROMPT_TOKENS = 64
NEW_TOKENS = 64
SAMPLED = dict(temperature=1.0, top_k=50, top_p=0.9, seed=0)


def median_time(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-reference", action="store_true", help="skip transformers")
    args = parser.parse_args()

    import numpy as np
    import torch

    from model import load_model
    from model.generation import IncrementalDecoder, blas_linear

    lm = load_model()
    cfg = lm.config
    ids = (lm.encode(PROMPT) * 2)[:PROMPT_TOKENS]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}; prompt "
          f"{len(ids)} tokens, {NEW_TOKENS} new tokens, median of {args.runs} runs (machine shared with other "
          f"work: expect noise)\n")

    rows = []
    for name, kwargs in (("greedy", dict(temperature=0)), ("sampled T=1 k=50 p=0.9", SAMPLED)):
        g = lm.generate(ids, max_new_tokens=NEW_TOKENS, **kwargs)
        assert len(g.steps) == NEW_TOKENS, f"{name}: stopped after {len(g.steps)} tokens ({g.stop_reason})"
        total = median_time(lambda kwargs=kwargs: lm.generate(ids, max_new_tokens=NEW_TOKENS, **kwargs), args.runs)
        first = median_time(lambda kwargs=kwargs: lm.generate(ids, max_new_tokens=1, **kwargs), args.runs)
        rows.append((name, NEW_TOKENS / total, total, first))

    greedy_ids = lm.generate(ids, max_new_tokens=NEW_TOKENS, temperature=0).new_token_ids

    def feed_all():
        decoder = IncrementalDecoder(lm, len(ids) + NEW_TOKENS - 1)
        decoder.feed(ids)
        for token in greedy_ids[:-1]:
            decoder.feed([token])

    prefill = median_time(lambda: IncrementalDecoder(lm, len(ids)).feed(ids), args.runs)
    forward_all = median_time(feed_all, args.runs)
    forward_step = (forward_all - prefill) / (NEW_TOKENS - 1)

    print(f"{'ours':<24} {'tokens/s':>9} {'total s':>8} {'first token ms':>15} {'choose+record ms/step':>22}")
    for name, rate, total, first in rows:
        print(f"{name:<24} {rate:9.1f} {total:8.2f} {first * 1e3:15.1f} "
              f"{(total - forward_all) / NEW_TOKENS * 1e3:22.1f}")
    print(f"\nforward only: prompt ({len(ids)} tokens) {prefill * 1e3:.1f} ms, then {forward_step * 1e3:.1f} ms per "
          f"token (KV cache, attention row recorded)")

    x, x_ff = torch.randn(1, cfg.d_model), torch.randn(1, cfg.d_ff)

    def products(linear):
        for block in lm.blocks:
            linear(x, block.attn.w_qkv), linear(x, block.attn.w_o)
            linear(x, block.mlp.w_gate_up), linear(x_ff, block.mlp.w_down)

    with torch.inference_mode():
        blas = {name: median_time(lambda linear=linear: products(linear), args.runs)
                for name, linear in (("numpy", blas_linear), ("torch F.linear", torch.nn.functional.linear))}
    print("one step's weight products: " + ", ".join(f"{name} {t * 1e3:.1f} ms" for name, t in blas.items()))

    if args.no_reference:
        return
    import transformers

    from model.gguf import default_model_path

    path = default_model_path()
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
    inputs = torch.tensor([ids])

    def reference():
        with torch.inference_mode():
            return hf.generate(inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=NEW_TOKENS,
                               min_new_tokens=NEW_TOKENS, do_sample=False, output_attentions=True,
                               return_dict_in_generate=True, pad_token_id=hf.config.eos_token_id)

    out = reference()
    same = out.sequences[0, len(ids):].tolist() == greedy_ids
    ref_total = median_time(reference, args.runs)
    ref_rate = NEW_TOKENS / ref_total
    print(f"\ntransformers generate (greedy, output_attentions=True): {ref_rate:.1f} tokens/s, {ref_total:.2f} s; "
          f"same {NEW_TOKENS} tokens as ours: {same}")
    for name, rate, _, _ in rows:
        print(f"ratio ours / transformers ({name}): {rate / ref_rate:.2f}x tokens/s")


if __name__ == "__main__":
    main()
