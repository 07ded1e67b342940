"""A 0.5B-class model (Qwen2.5-0.5B's shapes, random weights) as Q8_0 and as Q4_K: load time, peak memory with a
256-token text, and a 128-token forward with the full attention trace against llama.cpp's prompt evaluation of the
same file on the same cores (llama-cpp-python, when installed: it is a bench-only reference, never a dependency).

    python -m bench.bench_models [--runs 3] [--keep DIR]

Each measurement runs in a fresh subprocess (peak RSS is the process's). The files are random valid blocks written
the way llama.cpp lays out Qwen2.5-0.5B's Q8_0 and Q4_K_M downloads: 896-wide rows cannot hold 256-value K-quant
blocks, so in the "Q4_K" file only ffn_down (4864 wide) is Q4_K and the other matrices fall back to Q5_0, as
llama.cpp's quantizer does; the embedding table is Q8_0 in both.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gguf
import numpy as np

SHAPES = dict(n_layers=24, d_model=896, n_heads=14, n_kv_heads=2, d_ff=4864, vocab=151_936, context=32_768)
BLOCKS = {"Q8_0": (34, [0]), "Q5_0": (22, [0]), "Q4_K": (144, [0, 2])}   # bytes per 32/256 values, fp16 scale offsets
TEXT = ("The old lighthouse keeper climbed the spiral stairs every evening, counting the steps as his father had "
        "taught him. ") * 20


def random_blocks(rows: int, cols: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Random valid raw blocks for a [rows, cols] matrix: random quants, small finite fp16 scales."""
    block_bytes, scale_offsets = BLOCKS[kind]
    per_block = 256 if kind.endswith("_K") else 32
    n_blocks = cols // per_block
    raw = rng.integers(0, 256, size=(rows, n_blocks, block_bytes), dtype=np.uint8)
    for offset in scale_offsets:
        scale = (np.abs(rng.standard_normal((rows, n_blocks))) * 2e-3 + 1e-4).astype(np.float16)
        raw[:, :, offset:offset + 2] = scale.view(np.uint8).reshape(rows, n_blocks, 2)
    return raw.reshape(rows, n_blocks * block_bytes)


def write_model(path: Path, variant: str) -> None:
    """Qwen2.5-0.5B's shapes with random weights; variant "Q8_0" or "Q4_K" (see the module docstring)."""
    from harness.tiny_gguf import smollm_vocab

    s = SHAPES
    rng = np.random.default_rng(0)
    hd = s["d_model"] // s["n_heads"]
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(s["n_layers"])
    w.add_context_length(s["context"])
    w.add_embedding_length(s["d_model"])
    w.add_feed_forward_length(s["d_ff"])
    w.add_head_count(s["n_heads"])
    w.add_head_count_kv(s["n_kv_heads"])
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    tokens, types, merges = smollm_vocab(48_900)
    n_extra = s["vocab"] - len(tokens)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens + [f"<|unused_{i}|>" for i in range(n_extra)])
    w.add_token_types(types + [gguf.TokenType.UNUSED] * n_extra)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(False)

    def matrix(name: str, rows: int, cols: int, kind: str) -> None:
        kind = "Q5_0" if variant == "Q4_K" and kind == "Q4_K" and cols % 256 else kind
        w.add_tensor(name, random_blocks(rows, cols, kind, rng), raw_dtype=gguf.GGMLQuantizationType[kind])

    D, F, q_rows, kv_rows = s["d_model"], s["d_ff"], s["n_heads"] * hd, s["n_kv_heads"] * hd
    block_kind = "Q8_0" if variant == "Q8_0" else "Q4_K"
    matrix("token_embd.weight", s["vocab"], D, "Q8_0")
    w.add_tensor("output_norm.weight", np.ones(D, np.float32))
    for i in range(s["n_layers"]):
        for name, rows, cols in (("attn_q", q_rows, D), ("attn_k", kv_rows, D), ("attn_v", kv_rows, D),
                                 ("attn_output", D, q_rows), ("ffn_gate", F, D), ("ffn_up", F, D),
                                 ("ffn_down", D, F)):
            matrix(f"blk.{i}.{name}.weight", rows, cols, block_kind)
        for name, rows in (("attn_q", q_rows), ("attn_k", kv_rows), ("attn_v", kv_rows)):
            w.add_tensor(f"blk.{i}.{name}.bias", (rng.standard_normal(rows) * 0.1).astype(np.float32))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(D, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(D, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


OURS = """
import json, re, statistics, sys, time
from pathlib import Path
t0 = time.perf_counter()


def peak_rss_mb():
    # VmHWM: this process's own peak (ru_maxrss also counts the parent's pages the child had before exec)
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024


from model import load_model
from app_core.scheduling import compute_threads
import torch
torch.set_num_threads(compute_threads())
lm = load_model(path=sys.argv[1])
load_s = time.perf_counter() - t0
trace = lm.run(sys.argv[2], max_tokens=256)
ids = trace.token_ids[:128]
times = []
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    lm.run_ids(ids)
    times.append(time.perf_counter() - t)
print(json.dumps({"load_s": load_s, "forward_128_s": statistics.median(times), "threads": torch.get_num_threads(),
                  "peak_rss_mb": peak_rss_mb()}))
"""
LLAMA_CPP = """
import json, statistics, sys, time
from llama_cpp import Llama
n_threads = int(sys.argv[4])
llm = Llama(model_path=sys.argv[1], n_ctx=512, n_threads=n_threads, n_threads_batch=n_threads, n_batch=512,
            verbose=False, logits_all=False)
ids = llm.tokenize(sys.argv[2].encode(), add_bos=False)[:128]
times = []
for _ in range(int(sys.argv[3])):
    llm.reset()
    t = time.perf_counter()
    llm.eval(ids)
    times.append(time.perf_counter() - t)
print(json.dumps({"prompt_eval_128_s": statistics.median(times), "threads": n_threads}))
"""


def measure(script: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=1800)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="folder for the generated files (kept between runs)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_models_"))
    folder.mkdir(parents=True, exist_ok=True)
    for variant in ("Q8_0", "Q4_K"):
        path = folder / f"qwen2-0.5b-shapes-{variant}.gguf"
        if not path.exists():
            t = time.perf_counter()
            write_model(path, variant)
            print(f"wrote {path.name} ({path.stat().st_size / 2**20:,.0f} MB) in {time.perf_counter() - t:.1f} s")
        ours = measure(OURS, str(path), TEXT, str(args.runs))
        print(f"{variant}: ours {ours}", flush=True)
        threads = str(ours.get("threads", 1))
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            print(f"{variant}: llama.cpp not installed (pip install llama-cpp-python): no reference")
            continue
        ref = measure(LLAMA_CPP, str(path), TEXT, str(args.runs), threads)
        print(f"{variant}: llama.cpp {ref}")
        if "forward_128_s" in ours and "prompt_eval_128_s" in ref:
            print(f"{variant}: 128-token forward with the full trace / llama.cpp prompt eval = "
                  f"{ours['forward_128_s'] / ref['prompt_eval_128_s']:.2f}x (target <= 1)")
    print(f"targets: load <= 3 s, peak RSS <= 1500 MB; median of {args.runs} forwards")


if __name__ == "__main__":
    main()
