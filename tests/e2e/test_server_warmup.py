"""`streamlit run app.py` loads the model as the server starts, before any browser connects (app_pages/_warmup.py)."""
import time
from pathlib import Path

from tests.e2e.browser_harness import free_port, start_app, stop_app, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
LOADED_RSS_MB = 450     # the dequantized weights alone are ~455 MB; a server without the model is ~200 MB
WARM_TIMEOUT_S = 120


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_model_is_loaded_before_the_first_visitor(tmp_path):
    port = free_port()
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        proc = start_app(ROOT, port, log)
        try:
            why = wait_healthy(proc, f"http://127.0.0.1:{port}", WARM_TIMEOUT_S)
            assert why is None, why
            deadline = time.monotonic() + WARM_TIMEOUT_S
            while rss_mb(proc.pid) < LOADED_RSS_MB and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.5)
            loaded_rss = rss_mb(proc.pid)
        finally:
            stop_app(proc)
    log_text = log_path.read_text(errors="replace")
    assert "warm-up failed" not in log_text, log_text[-3000:]
    assert loaded_rss >= LOADED_RSS_MB, (f"no browser connected, yet the server should have loaded the model: "
                                         f"RSS {loaded_rss:.0f} MB after {WARM_TIMEOUT_S} s")
