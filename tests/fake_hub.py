"""A local stand-in for the Hugging Face Hub, answering as huggingface.co does (enough for huggingface_hub's
hf_hub_url / get_hf_file_metadata / http_get and HfApi.model_info):

    HEAD|GET /{repo}/resolve/{revision}/{file}   an LFS file: 302 to the blob on another host (the "CDN", here a
                                                 second port) with X-Repo-Commit, ETag, X-Linked-Etag (the sha256,
                                                 quoted), X-Linked-Size; a small file: 200, ETag = its git blob sha1
    404 X-Error-Code: RepoNotFound (what the client reads) | EntryNotFound | RevisionNotFound
    HEAD|GET /blobs/{sha256}                     the bytes; Range: bytes=N- answers 206 with Content-Range
    GET /api/models/{repo}                       model_info with siblings (and their sizes / lfs.sha256)

Serve with `with FakeHub() as hub: hub.add("owner/name", "x.gguf", data)`; hub.url is HF_ENDPOINT. hub.ranges lists
the Range headers the blob host received; hub.damage[sha] = other bytes serves those instead (a checksum mismatch).
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.lfs: dict[str, bool] = {}
        self.blobs: dict[str, bytes] = {}
        self.damage: dict[str, bytes] = {}
        self.claimed_size: dict[str, int] = {}      # file -> the size the Hub claims instead of the real one
        self.ranges: list[str | None] = []
        self.delay_s = 0.0                          # the blob host waits this long before answering
        self.requests: list[tuple[str, str]] = []
        self._hub = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._hub.server_port}"
        self.cdn_url = f"http://127.0.0.1:{self._cdn.server_port}"

    def add(self, repo: str, filename: str, data: bytes, lfs: bool = True) -> str:
        """Publish data as repo's filename; returns its sha256."""
        sha = hashlib.sha256(data).hexdigest()
        self.repos.setdefault(repo, {})[filename] = data
        self.lfs[filename] = lfs
        self.blobs[sha] = data
        return sha

    def __enter__(self) -> FakeHub:
        for server in (self._hub, self._cdn):
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return None

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                path = unquote(self.path.split("?")[0])
                hub.requests.append((self.command, path))
                if path.startswith("/blobs/"):
                    return self._blob(path.removeprefix("/blobs/"), body)
                if path.startswith("/api/models/"):
                    return self._model_info(path.removeprefix("/api/models/").removesuffix("/revision/main"))
                if "/resolve/" not in path:
                    return self._error(404, "RepoNotFound", body)
                repo, rest = path.lstrip("/").split("/resolve/", 1)
                revision, _, filename = rest.partition("/")
                if repo not in hub.repos:
                    return self._error(404, "RepoNotFound", body)
                if revision not in ("main", COMMIT):
                    return self._error(404, "RevisionNotFound", body)
                data = hub.repos[repo].get(filename)
                if data is None:
                    return self._error(404, "EntryNotFound", body)
                sha = hashlib.sha256(data).hexdigest()
                size = hub.claimed_size.get(filename, len(data))
                self.send_response(302 if hub.lfs[filename] else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{git_sha1(data)}"')
                if hub.lfs[filename]:
                    self.send_header("X-Linked-Etag", f'"{sha}"')
                    self.send_header("X-Linked-Size", str(size))
                    self.send_header("Location", f"{hub.cdn_url}/blobs/{sha}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if body:
                    self.wfile.write(data)
                return None

            def _blob(self, sha: str, body: bool) -> None:
                time.sleep(hub.delay_s)
                data = hub.damage.get(sha, hub.blobs.get(sha))
                if data is None:
                    return self._error(404, "EntryNotFound", body)
                asked = self.headers.get("Range")
                if body:
                    hub.ranges.append(asked)
                start = int(asked.removeprefix("bytes=").split("-")[0]) if asked else 0
                self.send_response(206 if asked else 200)
                if asked:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if body:
                    self.wfile.write(data[start:])
                return None

            def _model_info(self, repo: str) -> None:
                if repo not in hub.repos:
                    return self._error(404, "RepoNotFound", True)
                siblings = [{"rfilename": name, "size": len(data), "blobId": git_sha1(data),
                             "lfs": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                             if hub.lfs[name] else None}
                            for name, data in hub.repos[repo].items()]
                payload = json.dumps({"id": repo, "modelId": repo, "sha": COMMIT, "private": False,
                                      "siblings": siblings}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return None

            def _error(self, status: int, code: str, body: bool) -> None:
                payload = json.dumps({"error": f"{code}: not here"}).encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", f"{code}: not here")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)
                return None

        return Handler
