"""Speed of generation (model/generation.py) against transformers' generate on the same GGUF.

Measures, as the median of --runs runs after one warm-up, the runs of all contenders interleaved (so a change in
the machine's load hits them alike; the load average is printed before and after):
- ours: lm.generate on a 64-token prompt, 64 new tokens, attention rows and candidates recorded (greedy, and
  sampled with temperature 1.0, top-k 50, top-p 0.9); new tokens per second;
- transformers: model.generate(do_sample=False, output_attentions=True, return_dict_in_generate=True) with its
  KV cache, eager attention, float32, the same prompt ids; the ratio ours / transformers in tokens per second.
  Both make exactly 64 new tokens (transformers gets min_new_tokens; the prompt does not reach end-of-sequence);
- where the time goes: the prompt forward, the KV-cached forward of one token (IncrementalDecoder.feed), and the
  rest of a step (softmax, filtering, sampling, top-10 candidates) as total minus forward;
- the choice of BLAS: one step's 120 weight matrix-vector products through numpy (OpenBLAS, what generation uses)
  and through torch's F.linear (MKL);
- llama.cpp (llama-cpp-python, when installed; a bench-only reference, never a dependency) on the same file and
  thread count: new tokens per second for the same prompt, and its prompt evaluation of 64 and 256 tokens against
  our prompt pass with the full attention trace (lm.run_ids), also with torch one core below, as the app runs it.
  On a CPU with AMX in a VM that refuses its tile registers, llama.cpp's default (native) build dies in its AMX
  kernel (SIGSEGV at ldtilecfg): build it without, e.g. CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON
  -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF
  -DGGML_AMX_INT8=OFF" pip install --force-reinstall --no-deps llama-cpp-python;
- many streams: 10 concurrent 32-token generations (threads, distinct prompts and seeds; they share each decoding
  step) against one alone; then --class-size (30) of them, the engine's part of a class pressing Generate, alone and
  beside --busy-threads (4) Python threads that keep asking for the GIL (a class's page runs, with the app's 1 ms
  switch interval): each time the batch thread hands the GIL on, it waits for it behind them.
With --qwen05b the model is instead Qwen2.5-0.5B's shapes with random Q8_0 weights (bench.bench_models writes
it; its matrices stay quantized in memory), with llama.cpp as the only reference; --model PATH runs any GGUF so.
Usage (from the repository root): python -m bench.bench_generate [--runs 5] [--no-reference] [--qwen05b | --model P]
[--class-size 30] [--busy-threads 4]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

PROMPT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined "
          "movable metal type, oil-based ink and a wooden press adapted from winemaking to produce books that were "
          "cheaper and more uniform than anything copied by hand. Within fifty years, presses had spread")
PROMPT_TOKENS = 64
NEW_TOKENS = 64
SAMPLED = dict(temperature=1.0, top_k=50, top_p=0.9, seed=0)


def interleaved_medians(fns: dict, runs: int) -> dict[str, float]:
    """Median seconds of each function, after one warm-up each, run in turn `runs` times."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            time.sleep(0.3)                     # let the previous contender's thread pools stop spinning
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def load_average() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-reference", action="store_true", help="skip transformers")
    parser.add_argument("--model", help="a GGUF file instead of the default model (no transformers reference)")
    parser.add_argument("--qwen05b", action="store_true", help="Qwen2.5-0.5B's shapes, random Q8_0 weights")
    parser.add_argument("--class-size", type=int, default=30, help="streams of the second many-streams run")
    parser.add_argument("--busy-threads", type=int, default=4, help="Python threads beside the class's streams")
    args = parser.parse_args()
    if args.qwen05b:
        import tempfile
        from pathlib import Path

        from bench.bench_models import write_model

        args.model = str(Path(tempfile.mkdtemp()) / "qwen05b-q8_0.gguf")
        write_model(Path(args.model), "Q8_0")

    import numpy as np
    import torch

    from model import load_model
    from model.decoder.generation import IncrementalDecoder
    from model.decoder.step_weights import BlockWeights

    lm = load_model(path=args.model) if args.model else load_model()
    cfg = lm.config
    ids = (lm.encode(PROMPT) * 2)[:PROMPT_TOKENS]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}; prompt "
          f"{len(ids)} tokens, {NEW_TOKENS} new tokens, median of {args.runs} interleaved runs")
    print(f"start: {load_average()} (the machine may be shared with other work: expect noise)\n", flush=True)

    modes = {"ours greedy": dict(temperature=0), "ours sampled T=1 k=50 p=0.9": SAMPLED}
    contenders = {name: (lambda kwargs=kwargs: lm.generate(ids, max_new_tokens=NEW_TOKENS, **kwargs))
                  for name, kwargs in modes.items()}
    greedy_ids = lm.generate(ids, max_new_tokens=NEW_TOKENS, temperature=0).new_token_ids
    assert len(greedy_ids) == NEW_TOKENS, "the prompt reached end-of-sequence: pick another"
    same = None
    if not args.no_reference and not args.model:
        import transformers

        from model.files.gguf import default_model_path

        path = default_model_path()
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
        inputs = torch.tensor([ids])

        def reference():
            with torch.inference_mode():
                return hf.generate(inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=NEW_TOKENS,
                                   min_new_tokens=NEW_TOKENS, do_sample=False, output_attentions=True,
                                   return_dict_in_generate=True, pad_token_id=hf.config.eos_token_id)

        same = reference().sequences[0, len(ids):].tolist() == greedy_ids
        contenders["transformers greedy"] = reference

    totals = interleaved_medians(contenders, args.runs)
    print(f"{'':<30} {'tokens/s':>9} {'total s':>8}")
    for name, total in totals.items():
        print(f"{name:<30} {NEW_TOKENS / total:9.1f} {total:8.2f}")
    if same is not None:
        ref = totals["transformers greedy"]
        for name in modes:
            print(f"ratio {name} / transformers: {ref / totals[name]:.2f}x tokens/s")
        print(f"transformers made the same {NEW_TOKENS} greedy tokens as ours: {same}")

    def feed_all():
        decoder = IncrementalDecoder(lm, len(ids) + NEW_TOKENS - 1)
        decoder.feed(ids)
        for token in greedy_ids[:-1]:
            decoder.feed([token])

    x, x_ff = torch.randn(1, cfg.d_model), torch.randn(1, cfg.d_ff)
    x_np, x_ff_np = x[0].numpy(), x_ff[0].numpy()
    weights = [BlockWeights.of(block) for block in lm.blocks]
    dense = all(isinstance(m, torch.Tensor) for w in weights for m in (w.qkv, w.o, w.up, w.down))
    as_numpy = [[m.numpy() for m in (w.qkv, w.o, w.up, w.down)] for w in weights] if dense else []

    def numpy_products():
        for qkv, o, up, down in as_numpy:
            qkv @ x_np, o @ x_np, up @ x_np, down @ x_ff_np

    def torch_products():
        for block in lm.blocks:
            linear = torch.nn.functional.linear
            linear(x, block.attn.w_qkv), linear(x, block.attn.w_o)
            linear(x, block.mlp.w_gate_up), linear(x_ff, block.mlp.w_down)

    products = {"numpy": numpy_products, "torch F.linear": torch_products} if dense else {}
    with torch.inference_mode():
        parts = interleaved_medians({
            "prompt": lambda: IncrementalDecoder(lm, len(ids)).feed(ids), "forward": feed_all, **products,
        }, args.runs)
    step = (parts["forward"] - parts["prompt"]) / (NEW_TOKENS - 1)
    print(f"\nforward only: prompt ({len(ids)} tokens) {parts['prompt'] * 1e3:.1f} ms, then {step * 1e3:.1f} ms per "
          f"token (KV cache, attention row recorded)")
    for name in modes:
        print(f"rest of a step, {name}: {(totals[name] - parts['forward']) / NEW_TOKENS * 1e3:.1f} ms "
              f"(choose and record the token)")
    if dense:
        print(f"one step's {4 * cfg.n_layers} weight matrix-vector products: numpy (OpenBLAS) "
              f"{parts['numpy'] * 1e3:.1f} ms, torch F.linear (MKL) {parts['torch F.linear'] * 1e3:.1f} ms")
    llama_cpp_reference(lm, ids, greedy_ids, totals, args.runs)
    many_streams(lm, args.runs)
    many_streams(lm, args.runs, streams=args.class_size)
    many_streams(lm, min(args.runs, 3), streams=args.class_size, busy_threads=args.busy_threads)
    print(f"\nend: {load_average()}")


def llama_cpp_reference(lm, ids: list[int], greedy_ids: list[int], totals: dict[str, float], runs: int) -> None:
    """llama.cpp on the same file and threads: generation tokens/s and prompt evaluation against ours."""
    try:
        from llama_cpp import Llama
    except ImportError:
        print("\nllama.cpp: not installed (pip install llama-cpp-python, bench only): no reference")
        return
    import torch

    from app_core.scheduling import compute_threads

    threads = torch.get_num_threads()
    llm = Llama(model_path=lm.source, n_ctx=1024, n_threads=threads, n_threads_batch=threads, n_batch=512,
                verbose=False)

    def llama_generate():
        llm.reset()
        out = []
        for token in llm.generate(ids, temp=0.0, reset=True):
            out.append(token)
            if len(out) == NEW_TOKENS:
                break
        return out

    long_ids = (lm.encode(PROMPT) * 8)[:256]

    def llama_prompt(n):
        def run():
            llm.reset()
            llm.eval(long_ids[:n])
        return run

    app_threads = compute_threads()                      # torch one core below, as the app sets it

    def ours_as_the_app(n):
        def run():
            torch.set_num_threads(app_threads)
            try:
                lm.run_ids(long_ids[:n])
            finally:
                torch.set_num_threads(threads)
        return run

    measured = interleaved_medians({
        "llama.cpp generate": llama_generate, "llama.cpp prompt 64": llama_prompt(64),
        "llama.cpp prompt 256": llama_prompt(256), "ours prompt 64": lambda: lm.run_ids(long_ids[:64]),
        "ours prompt 256": lambda: lm.run_ids(long_ids[:256]), "app prompt 64": ours_as_the_app(64),
        "app prompt 256": ours_as_the_app(256)}, runs)
    same = llama_generate() == greedy_ids
    ref = NEW_TOKENS / measured["llama.cpp generate"]
    print(f"\nllama.cpp ({threads} threads): {ref:.1f} new tokens/s (same {NEW_TOKENS} greedy tokens as ours: {same})")
    for name in ("ours greedy", "ours sampled T=1 k=50 p=0.9"):
        print(f"ratio {name} / llama.cpp: {NEW_TOKENS / totals[name] / ref:.2f}x tokens/s (target >= 1, >= 0.7)")
    for n in (64, 256):
        print(f"prompt {n} tokens: ours with the full trace {measured[f'ours prompt {n}'] * 1e3:.0f} ms, llama.cpp "
              f"{measured[f'llama.cpp prompt {n}'] * 1e3:.0f} ms: "
              f"{measured[f'ours prompt {n}'] / measured[f'llama.cpp prompt {n}']:.2f}x its time (target <= 0.8); with "
              f"torch on {app_threads} thread(s) as the app runs it {measured[f'app prompt {n}'] * 1e3:.0f} ms: "
              f"{measured[f'app prompt {n}'] / measured[f'llama.cpp prompt {n}']:.2f}x")


def many_streams(lm, runs: int, streams: int = 10, new_tokens: int = 32, busy_threads: int = 0) -> None:
    """Wall time of `streams` concurrent generations (threads) against one alone; with busy_threads, both measured
    while that many pure-Python threads run (the GIL handed on every 1 ms, as app.py sets it)."""
    import sys
    import threading

    prompts = [f"{PROMPT[:60 + 7 * i]}" for i in range(streams)]

    def one():
        lm.generate(prompts[0], max_new_tokens=new_tokens, temperature=1.0, seed=0)

    def many():
        threads = [threading.Thread(target=lm.generate, args=(p,),
                                    kwargs=dict(max_new_tokens=new_tokens, temperature=1.0, seed=i))
                   for i, p in enumerate(prompts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    stop = threading.Event()

    def busy():
        while not stop.is_set():
            sum(range(1000))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001 if busy_threads else interval)
    pythons = [threading.Thread(target=busy, daemon=True) for _ in range(busy_threads)]
    for t in pythons:
        t.start()
    try:
        measured = interleaved_medians({"one": one, "many": many}, runs)
    finally:
        stop.set()
        for t in pythons:
            t.join()
        sys.setswitchinterval(interval)
    target = " (target <= 3)" if streams == 10 and not busy_threads else ""
    beside = f" beside {busy_threads} busy Python threads" if busy_threads else ""
    print(f"\n{streams} concurrent {new_tokens}-token generations{beside}: {measured['many']:.2f} s, one alone "
          f"{measured['one']:.2f} s: {measured['many'] / measured['one']:.2f}x its time{target}")


if __name__ == "__main__":
    main()
