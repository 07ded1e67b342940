"""Server time of a mask switch on the Efficient attention page (issue target: within 1 s for a 256-token text).

Runs the page in Streamlit's AppTest (the page script, its caches and figures, no browser) on a 256-token text,
the model on ATLAS_TORCH_THREADS threads (the server's default: all cores but one). Each "cold" switch picks a mask
not computed yet (one masked forward pass and its per-token log-probabilities); "warm" switches go back to masks
already computed (cache hits: figures only). Prints wall and CPU seconds of each rerun and their medians.
Run (from the repository root): python -m bench.bench_efficient
"""
from __future__ import annotations

import statistics
import time
import warnings

warnings.filterwarnings("ignore")

import streamlit.logger  # noqa: E402

from app_core import schemas as S  # noqa: E402
from app_core.scheduling import compute_threads  # noqa: E402
from harness.apptest import example, open_page, rerun  # noqa: E402
from model.files.gguf import default_model_path, open_reader, tokenizer_metadata  # noqa: E402
from model.tokenizers.from_gguf import build_tokenizer  # noqa: E402

TOKENS = 256
COLD = [("sink", 64), ("strided", 64), ("dilated", 64), ("window", 32), ("sink", 32)]
WARM = [("window", 64), ("sink", 64), ("window", 32)]
MASK, WINDOW = (S.EFFICIENT.by_name(name).key for name in ("mask", "window"))


def switch(at, kind: str, window: int) -> tuple[float, float]:
    """Pick a mask (and window) as a user would, rerun: (wall s, CPU s)."""
    wall, cpu = time.perf_counter(), time.process_time()
    at.selectbox(key=MASK).set_value(kind)
    if kind != "strided":
        at.session_state[WINDOW] = window
    rerun(at)
    return time.perf_counter() - wall, time.process_time() - cpu


def first_tokens(text: str, n: int) -> tuple[str, int]:
    """The text of text's first n tokens in the built-in model's tokenizer, and its token count."""
    path = default_model_path()
    tokenizer = build_tokenizer(tokenizer_metadata(open_reader(path)), path.stem)
    cut = tokenizer.decode(tokenizer.encode(text)[:n])
    return cut, len(tokenizer.encode(cut))


def main() -> None:
    text, n_tokens = first_tokens(" ".join([example("long story")] * 2), TOKENS)
    at = open_page("efficient", view="masks", text=text)       # the full pass and the 64-token window, computed
    streamlit.logger.set_log_level("error")     # after the first run read the config: no "missing ScriptRunContext"
    print(f"{n_tokens} tokens, torch threads: {compute_threads()}")
    for name, cases in (("cold", COLD), ("warm", WARM)):
        times = [switch(at, kind, window) for kind, window in cases]
        for (kind, window), (wall, cpu) in zip(cases, times, strict=True):
            print(f"  {name} {kind:8s} w={window:3d}: {wall:.2f} s wall, {cpu:.2f} s CPU")
        print(f"{name}: median {statistics.median(t[0] for t in times):.2f} s wall, "
              f"{statistics.median(t[1] for t in times):.2f} s CPU")


if __name__ == "__main__":
    main()
