"""Follower ids: issued by the server when a student joins, signed for their class, so that only ids the server gave
count as followers (an invented id is refused before it is counted or held).

An id is 32 hex digits: 16 random, then the first 16 of HMAC-SHA256(key, "<code>:<random>"). The key is the
deployment's: ATLAS_CLASS_KEY when set (the same on every replica), else the class store's own (store.shared_key():
one random key per process in memory; with Redis one random key kept in Redis, `atlas:key`, read once per process),
so an id verifies on whichever replica the follower's asks reach.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

KEY_ENV = "ATLAS_CLASS_KEY"
NONCE_HEX = 16
TAG_HEX = 16
FOLLOWER_ID = re.compile(r"[0-9a-f]{32}")


def key_from_text(text: str) -> bytes:
    """The signing key from a configured text (any length)."""
    return hashlib.sha256(b"atlas-follower-key:" + text.encode()).digest()


def _tag(key: bytes, code: str, nonce: str) -> str:
    return hmac.new(key, f"{code}:{nonce}".encode(), hashlib.sha256).hexdigest()[:TAG_HEX]


def issue(key: bytes, code: str) -> str:
    """A new follower id for class code."""
    nonce = secrets.token_hex(NONCE_HEX // 2)
    return nonce + _tag(key, code, nonce)


def is_signed(key: bytes, code: str, follower: str) -> bool:
    """Whether follower is an id this deployment issued for class code (compared in constant time)."""
    if not isinstance(follower, str) or FOLLOWER_ID.fullmatch(follower) is None:
        return False
    return hmac.compare_digest(follower[NONCE_HEX:], _tag(key, code, follower[:NONCE_HEX]))
