"""Run as a script: the app (Streamlit's AppTest, in this process) shown N distinct long texts one after another,
each on the Attention page's one-head and whole-model views and the Causal mask page, text i with model i modulo
the models named after the two numbers (file names in ATLAS_MODELS_DIR; 'builtin': the built-in model; none: the
built-in model only); prints JSON with this process's peak and final RSS, the caches' byte totals and the loaded
models' pool. The test runs it in a fresh process, so no other test's models count."""
from __future__ import annotations

import json
import sys

from streamlit.testing.v1 import AppTest

from app_core import models_folder as _models
from app_pages.frame import session
from harness.apptest import APP, go_to


def rss_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def main(n_texts: int, n_words: int, models: list[str]) -> None:
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    after_first = rss_mb("VmRSS:")
    for i in range(n_texts):
        go_to(at, "attention")
        at.session_state["attention_view"] = "head"
        if models:
            at.session_state["model"] = None if models[i % len(models)] == "builtin" else models[i % len(models)]
        at.session_state["text"] = f"Text number {i}: " + " ".join(f"word{(i * 7 + j) % 997}" for j in range(n_words))
        at.run()
        at.session_state["attention_view"] = "model"
        at.run()
        go_to(at, "causal-mask")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    sizes = {name: cache.total_bytes / 2**20 for name, cache in session.caches().items()}
    print(json.dumps({"peak_mb": rss_mb("VmHWM:"), "final_mb": rss_mb("VmRSS:"), "after_first_mb": after_first,
                      "cache_mb": sizes, "budget_mb": session.cache_budget_mb(),
                      "models_mb": _models.pool().total_bytes / 2**20,
                      "models_budget_mb": _models.memory_budget_bytes() / 2**20, "loads": _models.pool().loads,
                      "loaded": [key[0] for key in _models.pool().keys()]}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
