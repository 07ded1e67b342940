"""app_pages._static_assets: Streamlit's hashed frontend files from memory, gzip-compressed, driven as a plain
ASGI app (no server): what a browser gets equals the file on disk; what it may not get goes to Streamlit."""
from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import pytest

from app_pages._static_assets import CompressedStaticAssets

SCRIPT = b"export const answer = 42;\n" * 400
FONT = bytes(range(256)) * 8


@pytest.fixture
def static_dir(tmp_path: Path) -> Path:
    (tmp_path / "static" / "js").mkdir(parents=True)
    (tmp_path / "static" / "media").mkdir()
    (tmp_path / "static" / "js" / "index.Ab12.js").write_bytes(SCRIPT)
    (tmp_path / "static" / "media" / "Font.Cd34.woff2").write_bytes(FONT)
    (tmp_path / "index.html").write_bytes(b"<html></html>")
    (tmp_path.parent / "secret.txt").write_bytes(b"not for the web")
    return tmp_path


def request(app, path: str, method: str = "GET", encoding: bytes = b"gzip, deflate, br") -> dict:
    """Send one HTTP request through app; the response's status, headers and body (or who answered)."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"accept-encoding", encoding)]}
    asyncio.run(app(scope, receive, send))
    if sent and sent[0] == "streamlit":
        return {"by": "streamlit"}
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return {"by": "cache", "status": sent[0]["status"], "headers": headers, "body": sent[1]["body"]}


async def streamlit(scope, receive, send):
    """Stands in for Streamlit's own handler: records that the request reached it."""
    await send("streamlit")


def test_a_script_is_sent_gzipped_and_decompresses_to_the_file(static_dir):
    app = CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url="")
    for _ in range(2):                                   # compressed on the first request, from memory after
        r = request(app, "/static/js/index.Ab12.js")
        assert r["status"] == 200 and r["headers"]["content-encoding"] == "gzip"
        assert gzip.decompress(r["body"]) == SCRIPT
        assert int(r["headers"]["content-length"]) == len(r["body"]) < len(SCRIPT) / 10
        assert r["headers"]["content-type"] == "text/javascript"
        assert "immutable" in r["headers"]["cache-control"] and r["headers"]["vary"] == "Accept-Encoding"
    assert len(app._cache) == 1


def test_a_compressed_font_is_sent_as_it_is(static_dir):
    r = request(CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url=""),
                "/static/media/Font.Cd34.woff2")
    assert r["body"] == FONT and "content-encoding" not in r["headers"]


def test_head_sends_the_length_without_the_body(static_dir):
    r = request(CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url=""),
                "/static/js/index.Ab12.js", method="HEAD")
    assert r["body"] == b"" and int(r["headers"]["content-length"]) > 0


def test_a_base_url_prefixes_the_paths(static_dir):
    app = CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url="/atlas/")
    assert gzip.decompress(request(app, "/atlas/static/js/index.Ab12.js")["body"]) == SCRIPT
    assert request(app, "/static/js/index.Ab12.js")["by"] == "streamlit"


@pytest.mark.parametrize("path", ["/", "/index.html", "/static/js/missing.js", "/static/../../secret.txt",
                                  "/static/js/../../../secret.txt", "/static/js", "/_stcore/health"])
def test_anything_but_a_listed_file_goes_to_streamlit(static_dir, path):
    assert request(CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url=""), path)["by"] == \
        "streamlit"


@pytest.mark.parametrize("encoding", [b"", b"identity", b"br", b"gzip;q=0"])
def test_a_client_without_gzip_goes_to_streamlit(static_dir, encoding):
    app = CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url="")
    assert request(app, "/static/js/index.Ab12.js", encoding=encoding)["by"] == "streamlit"


def test_only_get_and_head_are_answered(static_dir):
    app = CompressedStaticAssets(streamlit, static_dir=str(static_dir), base_url="")
    assert request(app, "/static/js/index.Ab12.js", method="POST")["by"] == "streamlit"
