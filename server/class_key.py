"""The teacher's key in an HttpOnly cookie, set by the server (a Streamlit script cannot set one): app.py serves
POST KEY_PATH beside Streamlit.

When a session starts teaching (or adopts the class from its cookie), it asks the store for a one-time ticket
(TICKET_S, single use; the store keeps the key sealed with it) and hands the ticket to a tiny component in its own
page (_class_js.KEY_JS), which POSTs it here in the body: the answer's Set-Cookie holds code.secret (HttpOnly,
SameSite=Strict, Path=/, Secure when the request came over HTTPS or X-Forwarded-Proto says so), a session cookie.
Neither the ticket nor the key is ever in a URL, the browser's history or a proxy's request log. `forget=<code>`
clears the cookie when it holds that class (the class ended). The page's script reads the cookie back from
`st.context.cookies` (the websocket handshake's Cookie header) when the teacher reloads or opens a new tab.

Checked before anything else: no query string, the header X-Atlas-Class: 1 and no cross-site Sec-Fetch-Site (a
cross-site page cannot send that header without a preflight we never allow), a body of at most BODY_BYTES holding
exactly one field matching its whole pattern; else 400 / 403.
"""
from __future__ import annotations

import asyncio
import re
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app_core.classroom import StoreUnavailable, class_store, codes

KEY_PATH = "/_atlas/class/key"
COOKIE = "atlas_teach"            # code.secret: the teacher's browser, never a URL
ASKED_BY = ("x-atlas-class", "1")
BODY_BYTES = 128
FIELDS = {"ticket": re.compile(r"[A-Za-z0-9_-]{32}"), "forget": re.compile(r"[0-9A-Z]{12}")}
NO_STORE = {"Cache-Control": "no-store"}


def routes() -> list[Route]:
    """The route, for st.App(routes=...)."""
    return [Route(KEY_PATH, swap_ticket, methods=["POST"])]


def cookie_header(token: str | None, secure: bool) -> str:
    """The Set-Cookie value holding token (None: clearing the cookie)."""
    value = f"{COOKIE}={token}" if token else f"{COOKIE}=; Max-Age=0"
    return value + "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def _over_https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


async def _body(request: Request) -> bytes | None:
    """The body if it is at most BODY_BYTES (read no further), else None."""
    length = request.headers.get("content-length", "")
    if not (length.isascii() and length.isdigit()) or int(length) > BODY_BYTES:
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > BODY_BYTES:
            return None
    return body


def read_body(body: bytes) -> tuple[str, str] | None:
    """(field, value) of a body holding exactly one known field that matches its pattern; else None."""
    try:
        items = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=True, max_num_fields=2)
    except (UnicodeDecodeError, ValueError):
        return None
    if len(items) != 1 or items[0][0] not in FIELDS or not FIELDS[items[0][0]].fullmatch(items[0][1]):
        return None
    return items[0]


def _answer(status: int, cookie: str | None = None) -> Response:
    headers = dict(NO_STORE, **({"Set-Cookie": cookie} if cookie else {}))
    return Response(status_code=status, headers=headers)


async def swap_ticket(request: Request) -> Response:
    if request.url.query or request.headers.get(ASKED_BY[0]) != ASKED_BY[1]:
        return _answer(400)
    if request.headers.get("sec-fetch-site", "same-origin") != "same-origin":
        return _answer(403)
    body = await _body(request)
    asked = None if body is None else read_body(body)
    if asked is None:
        return _answer(400)
    field, value = asked
    secure = _over_https(request)
    if field == "forget":
        held = codes.read_teacher_token(request.cookies.get(COOKIE, ""))
        return _answer(204, cookie_header(None, secure) if held and held[0] == value else None)
    store = class_store()
    try:
        token = await asyncio.to_thread(store.redeem_ticket, value) if store.networked else store.redeem_ticket(value)
    except StoreUnavailable:
        return _answer(503)
    return _answer(403) if token is None else _answer(204, cookie_header(token, secure))
