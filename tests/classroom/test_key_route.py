"""The teacher's key route (server/class_key.py): a one-time ticket swapped for an HttpOnly cookie, once; the
cookie's flags; every malformed or cross-site ask refused before the store is asked; the cookie cleared only for its
own class. Through starlette's own test client (the ASGI app app.py serves the route in)."""
from __future__ import annotations

import functools
from http.cookies import SimpleCookie

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app_core import classroom
from app_core.classroom import View, codes
from app_core.classroom.memory import MemoryStore
from server import class_key

ASKED = {"X-Atlas-Class": "1", "Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def client(monkeypatch):
    store = MemoryStore()
    monkeypatch.delenv("ATLAS_REDIS_URL", raising=False)
    monkeypatch.setattr(classroom, "_store_for", functools.cache(lambda url, most: store))
    with TestClient(Starlette(routes=class_key.routes()), base_url="http://class.example") as http:
        yield http, store


def _cookie(response) -> tuple[str, dict[str, str | bool]]:
    """(the cookie's value, its attributes as the header says them) of the one Set-Cookie."""
    headers = response.headers.get_list("set-cookie")
    assert len(headers) == 1, headers
    parts = [p.strip() for p in headers[0].split(";")]
    name, _, value = parts[0].partition("=")
    assert name == class_key.COOKIE
    flags = {p.partition("=")[0].lower(): (p.partition("=")[2] or True) for p in parts[1:]}
    return value, flags


def test_a_ticket_swaps_once_for_an_httponly_strict_cookie(client):
    http, store = client
    code, secret = store.create(View("attention"))
    ticket = store.issue_ticket(codes.teacher_token(code, secret))
    response = http.post(class_key.KEY_PATH, content=f"ticket={ticket}", headers=ASKED)
    assert response.status_code == 204 and response.headers["cache-control"] == "no-store"
    value, flags = _cookie(response)
    assert codes.read_teacher_token(value) == (code, secret)
    assert flags == {"path": "/", "httponly": True, "samesite": "Strict"}          # no Secure over plain HTTP
    assert SimpleCookie(response.headers["set-cookie"])[class_key.COOKIE]["httponly"]
    again = http.post(class_key.KEY_PATH, content=f"ticket={ticket}", headers=ASKED)
    assert again.status_code == 403 and "set-cookie" not in again.headers


def test_the_cookie_is_secure_behind_https(client):
    http, store = client
    code, secret = store.create(View("attention"))
    for ticket, headers, url in ((store.issue_ticket(codes.teacher_token(code, secret)),
                                  {**ASKED, "X-Forwarded-Proto": "https"}, class_key.KEY_PATH),
                                 (store.issue_ticket(codes.teacher_token(code, secret)), ASKED,
                                  "https://class.example" + class_key.KEY_PATH)):
        response = http.post(url, content=f"ticket={ticket}", headers=headers)
        assert response.status_code == 204 and _cookie(response)[1].get("secure") is True


def test_malformed_or_cross_site_asks_are_refused_before_the_store(client):
    http, store = client
    code, secret = store.create(View("attention"))
    ticket = store.issue_ticket(codes.teacher_token(code, secret))
    refused = [
        (f"ticket={ticket}", {"Content-Type": ASKED["Content-Type"]}, "", 400),           # no X-Atlas-Class
        (f"ticket={ticket}", ASKED, "?ticket=" + ticket, 400),                            # a query string
        (f"ticket={ticket}", {**ASKED, "Sec-Fetch-Site": "cross-site"}, "", 403),
        (f"ticket={ticket}", {**ASKED, "Sec-Fetch-Site": "same-site"}, "", 403),
        (f"ticket={ticket}&ticket={ticket}", ASKED, "", 400),
        (f"ticket={ticket}&forget={code}", ASKED, "", 400),
        (f"ticket={ticket}x", ASKED, "", 400),
        ("ticket=" + "²" * 32, ASKED, "", 400),
        ("x" * 5000, ASKED, "", 400),
        ("", ASKED, "", 400),
        (f"forget={code.lower()}", ASKED, "", 400),
    ]
    for body, headers, query, status in refused:
        response = http.post(class_key.KEY_PATH + query, content=body.encode(), headers=headers)
        assert response.status_code == status and "set-cookie" not in response.headers, (body, headers, query)
    assert http.get(class_key.KEY_PATH).status_code == 405
    assert store.redeem_ticket(ticket) == codes.teacher_token(code, secret)             # never spent by those


def test_forget_clears_the_cookie_only_for_its_own_class(client):
    http, store = client
    code, secret = store.create(View("attention"))
    other, _ = store.create(View("attention"))
    http.cookies.set(class_key.COOKIE, codes.teacher_token(code, secret), domain="class.example")
    kept = http.post(class_key.KEY_PATH, content=f"forget={other}", headers=ASKED)
    assert kept.status_code == 204 and "set-cookie" not in kept.headers
    cleared = http.post(class_key.KEY_PATH, content=f"forget={code}", headers=ASKED)
    value, flags = _cookie(cleared)
    assert value == "" and flags["max-age"] == "0" and flags["httponly"] is True
