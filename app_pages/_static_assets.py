"""Streamlit's frontend files served from memory, gzip-compressed once per server process.

Every visitor's browser fetches ~110 of Streamlit's hashed frontend files (7.7 MB) on a first visit. Streamlit
streams each from disk uncompressed: ~0.18 s of server CPU per visitor, and 7.7 MB over a classroom's network.
This ASGI middleware answers those requests itself: a file is read and compressed (gzip level 6: 7.7 MB -> 2.6 MB)
the first time any visitor asks for it, and sent from memory after that. Memory: at most the compressed size of
Streamlit's whole frontend (~8 MB), the files a browser asks for (~2.6 MB) in practice.

Only the files listed in Streamlit's static folder are served here (a path is looked up, never joined), to clients
that accept gzip; every other request goes to Streamlit unchanged.
"""
from __future__ import annotations

import gzip
import mimetypes
import os
from dataclasses import dataclass

import anyio
from streamlit import config, file_util

GZIP_LEVEL = 6
# Already-compressed formats: sent as they are (from memory too).
PRECOMPRESSED = (".woff2", ".woff", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".gz", ".br")
# The folder of hashed bundles (a file's name changes when its content does): cacheable for good.
CACHE_CONTROL = b"public, immutable, max-age=31536000"


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    gzipped: bool


def hashed_asset_files(static_dir: str) -> dict[str, str]:
    """{url path under the server root ("/static/js/x.js"): file path} of every file in static_dir/static."""
    root = os.path.join(static_dir, "static")
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            files["/static/" + os.path.relpath(path, root).replace(os.sep, "/")] = path
    return files


def load_asset(path: str) -> Asset:
    """The file's bytes, gzip-compressed unless its format is compressed already."""
    with open(path, "rb") as f:
        data = f.read()
    content_type = mimetypes.guess_type(path)[0] or "text/plain"
    if path.lower().endswith(PRECOMPRESSED):
        return Asset(data, content_type, gzipped=False)
    return Asset(gzip.compress(data, GZIP_LEVEL, mtime=0), content_type, gzipped=True)


def accepts_gzip(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"accept-encoding":
            return any(part.split(b";")[0].strip() in (b"gzip", b"*") and not part.strip().endswith(b"q=0")
                       for part in value.lower().split(b","))
    return False


class CompressedStaticAssets:
    """ASGI middleware: GET / HEAD of Streamlit's hashed frontend files from an in-memory gzip cache."""

    def __init__(self, app, static_dir: str | None = None, base_url: str | None = None):
        self.app = app
        self._static_dir = static_dir
        self._base_url = base_url
        self._files: dict[str, str] | None = None
        self._prefix = ""
        self._cache: dict[str, Asset] = {}

    def _lookup(self, path: str) -> str | None:
        if self._files is None:
            base = self._base_url if self._base_url is not None else (config.get_option("server.baseUrlPath") or "")
            self._prefix = "/" + base.strip("/") if base.strip("/") else ""
            self._files = hashed_asset_files(self._static_dir or file_util.get_static_dir())
        if not path.startswith(self._prefix):
            return None
        return self._files.get(path[len(self._prefix):])

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        file = self._lookup(scope["path"])
        if file is None or not accepts_gzip(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        asset = self._cache.get(file)
        if asset is None:
            asset = await anyio.to_thread.run_sync(load_asset, file)     # zlib releases the GIL meanwhile
            self._cache[file] = asset
        headers = [(b"content-type", asset.content_type.encode()), (b"content-length", str(len(asset.body)).encode()),
                   (b"cache-control", CACHE_CONTROL), (b"vary", b"Accept-Encoding")]
        if asset.gzipped:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": asset.body if scope["method"] == "GET" else b""})
