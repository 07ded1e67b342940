"""What `streamlit run app.py` does as a server, before and without any browser: it loads the model as it starts
(app_pages/frame/warmup.py), and it sends Streamlit's frontend files gzip-compressed, the page importing the Plotly
chunk (server/static_assets.py)."""
import gzip
import re
import time
import urllib.request
from pathlib import Path

import pytest
from streamlit import file_util

from harness.browser import running_app
from server.frontend_mends import mended

ROOT = Path(__file__).resolve().parents[2]
LOADED_RSS_MB = 450     # the dequantized weights alone are ~455 MB; a server without the model is ~200 MB
WARM_TIMEOUT_S = 120


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    with running_app(ROOT, log_path, WARM_TIMEOUT_S) as (proc, url):
        yield proc, url, log_path


def get(url: str, encoding: str) -> tuple[dict, bytes]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=30) as response:
        return {k.lower(): v for k, v in response.headers.items()}, response.read()


def test_model_is_loaded_before_the_first_visitor(server):
    proc, _, log_path = server
    deadline = time.monotonic() + WARM_TIMEOUT_S
    while rss_mb(proc.pid) < LOADED_RSS_MB and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    loaded_rss = rss_mb(proc.pid)
    log_text = log_path.read_text(errors="replace")
    assert "warm-up failed" not in log_text, log_text[-3000:]
    assert loaded_rss >= LOADED_RSS_MB, (f"no browser connected, yet the server should have loaded the model: "
                                         f"RSS {loaded_rss:.0f} MB after {WARM_TIMEOUT_S} s")


def test_frontend_script_is_sent_gzipped(server):
    """The page's entry script (named in index.html) arrives compressed and decompresses to the installed file; a
    client that does not accept gzip gets the plain file from Streamlit."""
    _, url, _ = server
    _, index = get(url + "/", "identity")
    script = re.search(rb'src="\.?(/static/js/index\.[\w-]+\.js)"', index).group(1).decode()
    on_disk = (Path(file_util.get_static_dir()) / script.lstrip("/")).read_bytes()
    headers, body = get(url + script, "gzip")
    assert headers.get("content-encoding") == "gzip" and len(body) < len(on_disk) / 2
    assert gzip.decompress(body) == on_disk
    headers, body = get(url + script, "identity")
    assert "content-encoding" not in headers and body == on_disk


def test_page_imports_the_installed_plotly_chunk(server):
    _, url, _ = server
    headers, index = get(url + "/", "gzip")
    html = gzip.decompress(index) if headers.get("content-encoding") == "gzip" else index
    chunk = re.search(rb'import\("\.(/static/js/PlotlyChart\.[\w-]+\.js)"\)', html).group(1)
    _, body = get(url + chunk.decode(), "gzip")
    installed = (Path(file_util.get_static_dir()) / chunk.decode().lstrip("/")).read_bytes()
    assert gzip.decompress(body) == mended(chunk.decode().rsplit("/", 1)[1], installed) != installed
