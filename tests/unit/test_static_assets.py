"""server.static_assets: Streamlit's hashed frontend files from memory, gzip-compressed, and its HTML page with
the Plotly chunk imported, driven as a plain ASGI app (no server) in front of a stand-in for Streamlit."""
from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import pytest

from server.static_assets import FrontendFiles

SCRIPT = b"export const answer = 42;\n" * 400
FONT = bytes(range(256)) * 8
PAGE = b"<html><head><title>Streamlit</title></head><body>" + b"<div></div>" * 300 + b"</body></html>"
PLOTLY_IMPORT = b'<script type="module">import("./static/js/PlotlyChart.Ef56.js")</script></head>'


@pytest.fixture
def static_dir(tmp_path: Path) -> Path:
    (tmp_path / "static" / "js").mkdir(parents=True)
    (tmp_path / "static" / "media").mkdir()
    (tmp_path / "static" / "js" / "index.Ab12.js").write_bytes(SCRIPT)
    (tmp_path / "static" / "js" / "PlotlyChart.Ef56.js").write_bytes(SCRIPT)
    (tmp_path / "static" / "media" / "Font.Cd34.woff2").write_bytes(FONT)
    (tmp_path.parent / "secret.txt").write_bytes(b"not for the web")
    return tmp_path


def streamlit(html_gzipped: bool = False):
    """Stands in for Streamlit: the HTML page at "/" (in two body parts, gzipped if asked), a marker elsewhere."""
    async def app(scope, receive, send):
        if scope["path"] == "/":
            body = gzip.compress(PAGE) if html_gzipped else PAGE
            headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
            headers += [(b"content-encoding", b"gzip")] if html_gzipped else []
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body[:100], "more_body": True})
            await send({"type": "http.response.body", "body": body[100:]})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"streamlit"})
    return app


def request(app, path: str, method: str = "GET", encoding: bytes = b"gzip, deflate, br") -> dict:
    """One HTTP request through app: the response's status, headers and whole body."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"accept-encoding", encoding)]}
    asyncio.run(app(scope, receive, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return {"status": sent[0]["status"], "headers": headers, "body": b"".join(m.get("body", b"") for m in sent[1:])}


def frontend(static_dir: Path, base_url: str = "", html_gzipped: bool = False) -> FrontendFiles:
    return FrontendFiles(streamlit(html_gzipped), static_dir=str(static_dir), base_url=base_url)


def test_a_script_is_sent_gzipped_and_decompresses_to_the_file(static_dir):
    app = frontend(static_dir)
    for _ in range(2):                                   # compressed on the first request, from memory after
        r = request(app, "/static/js/index.Ab12.js")
        assert r["status"] == 200 and r["headers"]["content-encoding"] == "gzip"
        assert gzip.decompress(r["body"]) == SCRIPT
        assert int(r["headers"]["content-length"]) == len(r["body"]) < len(SCRIPT) / 10
        assert r["headers"]["content-type"] == "text/javascript"
        assert "immutable" in r["headers"]["cache-control"] and r["headers"]["vary"] == "Accept-Encoding"
    assert len(app._cache) == 1


def test_a_compressed_font_is_sent_as_it_is(static_dir):
    r = request(frontend(static_dir), "/static/media/Font.Cd34.woff2")
    assert r["body"] == FONT and "content-encoding" not in r["headers"]


def test_head_sends_the_length_without_the_body(static_dir):
    r = request(frontend(static_dir), "/static/js/index.Ab12.js", method="HEAD")
    assert r["body"] == b"" and int(r["headers"]["content-length"]) > 0


def test_a_base_url_prefixes_the_paths(static_dir):
    app = frontend(static_dir, base_url="/atlas/")
    assert gzip.decompress(request(app, "/atlas/static/js/index.Ab12.js")["body"]) == SCRIPT
    assert request(app, "/static/js/index.Ab12.js")["body"] == b"streamlit"


@pytest.mark.parametrize("path", ["/index.html", "/static/js/missing.js", "/static/../../secret.txt",
                                  "/static/js/../../../secret.txt", "/static/js", "/_stcore/health"])
def test_anything_but_a_listed_file_goes_to_streamlit(static_dir, path):
    assert request(frontend(static_dir), path)["body"] == b"streamlit"


@pytest.mark.parametrize("encoding", [b"", b"identity", b"br", b"gzip;q=0"])
def test_a_client_without_gzip_gets_the_file_from_streamlit(static_dir, encoding):
    assert request(frontend(static_dir), "/static/js/index.Ab12.js", encoding=encoding)["body"] == b"streamlit"


def test_only_get_and_head_are_answered(static_dir):
    assert request(frontend(static_dir), "/static/js/index.Ab12.js", method="POST")["body"] == b"streamlit"


@pytest.mark.parametrize("html_gzipped", [False, True])
def test_the_html_page_imports_the_plotly_chunk_and_is_otherwise_unchanged(static_dir, html_gzipped):
    r = request(frontend(static_dir, html_gzipped=html_gzipped), "/")
    html = gzip.decompress(r["body"]) if html_gzipped else r["body"]
    assert html == PAGE.replace(b"</head>", PLOTLY_IMPORT)
    assert int(r["headers"]["content-length"]) == len(r["body"])
    assert r["headers"]["content-type"].startswith("text/html")


def test_without_a_plotly_chunk_the_page_is_unchanged(static_dir):
    (static_dir / "static" / "js" / "PlotlyChart.Ef56.js").unlink()
    assert request(frontend(static_dir), "/")["body"] == PAGE


def test_the_plotly_chunk_is_served_mended(static_dir):
    """server/frontend_mends.py's mend of the PlotlyChart chunk reaches the browser; other files are as written."""
    from server.frontend_mends import CHART_DRAWN_ONCE
    olds, news = zip(*CHART_DRAWN_ONCE.replacements, strict=True)
    (static_dir / "static" / "js" / "PlotlyChart.Ef56.js").write_bytes(b"f();".join(olds))
    served = gzip.decompress(request(frontend(static_dir), "/static/js/PlotlyChart.Ef56.js")["body"])
    assert served == b"f();".join(news)
    assert gzip.decompress(request(frontend(static_dir), "/static/js/index.Ab12.js")["body"]) == SCRIPT
