"""How Streamlit's frontend reaches a browser: its files from memory, gzip-compressed once per server process, and
the chart library started with the page.

Every visitor's browser fetches ~110 of Streamlit's hashed frontend files (7.7 MB) on a first visit. Streamlit
streams each from disk uncompressed: ~0.18 s of server CPU per visitor, and 7.7 MB over a classroom's network.
This ASGI middleware answers those requests itself: a file is read and compressed (gzip level 6: 7.7 MB -> 2.6 MB)
the first time any visitor asks for it, and sent from memory after that. Memory: at most the compressed size of
Streamlit's whole frontend (~8 MB), the files a browser asks for (~2.6 MB) in practice. Only the files listed in
Streamlit's static folder are served here (a path is looked up, never joined), to clients that accept gzip.

Streamlit's HTML page (the app's shell, ~8 kB) gets one line more: an import of the Plotly chunk (4.7 MB; every page
of this app draws Plotly figures). Streamlit's frontend imports it only when the first figure arrives, then spends
~0.7 s fetching and evaluating it before it draws; imported with the page, that happens while the frontend starts
and while a starting server still loads the model.

The files are served as server/frontend_mends.py mends them (a chart drawn once, not twice). A client that does not
accept gzip gets Streamlit's own files from Streamlit. Every other request goes to Streamlit unchanged.
"""
from __future__ import annotations

import gzip
import mimetypes
import os
from dataclasses import dataclass

import anyio
from streamlit import config, file_util

from server.frontend_mends import mended

GZIP_LEVEL = 6
# Already-compressed formats: sent as they are (from memory too).
PRECOMPRESSED = (".woff2", ".woff", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".gz", ".br")
# The folder of hashed bundles (a file's name changes when its content does): cacheable for good.
CACHE_CONTROL = b"public, immutable, max-age=31536000"
EARLY_CHUNKS = ("PlotlyChart",)     # /static/js/<name>.<hash>.js imported by the page itself


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
    """The file's bytes, mended (frontend_mends), gzip-compressed unless its format is compressed already."""
    with open(path, "rb") as f:
        data = mended(os.path.basename(path), f.read())
    content_type = mimetypes.guess_type(path)[0] or "text/plain"
    if path.lower().endswith(PRECOMPRESSED):
        return Asset(data, content_type, gzipped=False)
    return Asset(gzip.compress(data, GZIP_LEVEL, mtime=0), content_type, gzipped=True)


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes:
    return next((value for key, value in headers if key.lower() == name), b"")


def accepts_gzip(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(part.split(b";")[0].strip() in (b"gzip", b"*") and not part.strip().endswith(b"q=0")
               for part in header(headers, b"accept-encoding").lower().split(b","))


def early_imports(urls) -> bytes:
    """A module script importing the EARLY_CHUNKS among these url paths ("/static/js/x.js"), as Streamlit's
    frontend would (same URL, so the same module instance); empty if there are none."""
    chosen = sorted(u for u in urls if u.startswith("/static/js/") and u.rsplit("/", 1)[1].split(".")[0]
                    in EARLY_CHUNKS)
    return b"".join(f'<script type="module">import(".{u}")</script>'.encode() for u in chosen)


def with_early_imports(html: bytes, tags: bytes) -> bytes:
    """html with tags added at the end of its head (unchanged if it has none)."""
    return html.replace(b"</head>", tags + b"</head>", 1) if tags else html


class FrontendFiles:
    """ASGI middleware: GET / HEAD of Streamlit's hashed frontend files from an in-memory gzip cache; Streamlit's
    HTML page with_early_imports."""

    def __init__(self, app, static_dir: str | None = None, base_url: str | None = None):
        self.app = app
        self._static_dir = static_dir
        self._base_url = base_url
        self._files: dict[str, str] | None = None
        self._prefix = ""
        self._early = b""
        self._cache: dict[str, Asset] = {}

    def _lookup(self, path: str) -> str | None:
        if self._files is None:
            base = self._base_url if self._base_url is not None else (config.get_option("server.baseUrlPath") or "")
            self._prefix = "/" + base.strip("/") if base.strip("/") else ""
            self._files = hashed_asset_files(self._static_dir or file_util.get_static_dir())
            self._early = early_imports(self._files)
        if not path.startswith(self._prefix):
            return None
        return self._files.get(path[len(self._prefix):])

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        file = self._lookup(scope["path"])
        if file is None:
            await self.app(scope, receive, self._html_with_early_imports(send) if scope["method"] == "GET" else send)
            return
        if not accepts_gzip(scope.get("headers", [])):
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

    def _html_with_early_imports(self, send):
        """send, except that a 200 HTML response is held until its last body part and sent with_early_imports
        (decompressed and compressed again if Streamlit gzipped it)."""
        held: dict = {}
        parts: list[bytes] = []

        async def send_html_with_early_imports(message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 200 and header(message["headers"], b"content-type").startswith(b"text/html"):
                    held["start"] = message
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                parts.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                start, body = held.pop("start"), b"".join(parts)
                gzipped = header(start["headers"], b"content-encoding") == b"gzip"
                html = with_early_imports(gzip.decompress(body) if gzipped else body, self._early)
                body = gzip.compress(html, GZIP_LEVEL, mtime=0) if gzipped else html
                headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                message = {"type": "http.response.body", "body": body}
            await send(message)

        return send_html_with_early_imports
