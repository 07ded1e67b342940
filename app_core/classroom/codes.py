"""Join codes and the teacher's secret.

A join code is 12 characters of Crockford's base32 (60 random bits: no I, L, O or U, so nothing reads as another
character), shown in groups of four (K7QM-3XPD-H9TF) and read back whatever the case, dashes or spaces, with O as 0
and I / L as 1. The teacher's secret is 32 URL-safe characters (192 bits); the store keeps only its SHA-256.
A ticket (as random as a secret) lets the teacher's browser fetch its key as an HttpOnly cookie once: the store keeps
the key sealed with the ticket (XOR with a pad hashed from it) under the ticket's hash, so it holds no key in clear.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"      # Crockford's base32
CODE_CHARS = 12                                    # 60 bits
CODE_BITS = CODE_CHARS * 5
SECRET_BYTES = 24
TOKEN_BYTES = 64                                   # code.secret: 45 characters; the pad covers 64
_LOOKALIKES = str.maketrans({"O": "0", "I": "1", "L": "1"})
_SECRET = re.compile(r"[A-Za-z0-9_-]{32}")


def new_code() -> str:
    """A fresh join code (canonical form: 12 characters, no dashes)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_CHARS))


def new_secret() -> str:
    """A fresh teacher's secret."""
    return secrets.token_urlsafe(SECRET_BYTES)


def normalize(typed: str) -> str | None:
    """The canonical code of what someone typed (any case, dashes, spaces, O for 0, I or L for 1); None when it
    cannot be a code."""
    if not isinstance(typed, str) or len(typed) > 40:
        return None
    code = re.sub(r"[\s-]", "", typed).upper().translate(_LOOKALIKES)
    if len(code) != CODE_CHARS or any(c not in ALPHABET for c in code):
        return None
    return code


def shown(code: str) -> str:
    """The code as people read it: groups of four joined by dashes."""
    return "-".join(code[i:i + 4] for i in range(0, len(code), 4))


def is_secret(text: str) -> bool:
    """Whether text has the form of a teacher's secret."""
    return isinstance(text, str) and _SECRET.fullmatch(text) is not None


def secret_hash(secret: str) -> str:
    """What the store keeps of the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, kept_hash: str) -> bool:
    """Whether secret is the one whose hash the store kept (compared in constant time)."""
    return is_secret(secret) and hmac.compare_digest(secret_hash(secret), kept_hash)


def teacher_token(code: str, secret: str) -> str:
    """The teacher's own link parameter: code and secret in one value."""
    return f"{code}.{secret}"


def read_teacher_token(value: str) -> tuple[str, str] | None:
    """(code, secret) from the teacher's link parameter; None when it has not that form."""
    if not isinstance(value, str):
        return None
    code, dot, secret = value.partition(".")
    code = normalize(code)
    return (code, secret) if dot and code and is_secret(secret) else None


def new_ticket() -> str:
    """A fresh one-time ticket (the same form as a secret)."""
    return secrets.token_urlsafe(SECRET_BYTES)


def ticket_id(ticket: str) -> str:
    """The name the store keeps a ticket's sealed key under."""
    return hashlib.sha256(b"atlas-ticket-id:" + ticket.encode()).hexdigest()


def _pad(ticket: str) -> bytes:
    return hashlib.sha512(b"atlas-ticket-pad:" + ticket.encode()).digest()


def seal(token: str, ticket: str) -> str:
    """The teacher's token as the store keeps it for a ticket (hex; readable only with the ticket)."""
    raw = token.encode()
    if len(raw) > TOKEN_BYTES:
        raise ValueError("a teacher's token is at most 64 bytes")
    return bytes(a ^ b for a, b in zip(raw, _pad(ticket), strict=False)).hex()


def unseal(sealed: str, ticket: str) -> str | None:
    """The token sealed with ticket; None when it is not a token (another ticket, damaged)."""
    try:
        raw = bytes.fromhex(sealed)
    except ValueError:
        return None
    token = bytes(a ^ b for a, b in zip(raw, _pad(ticket), strict=False)).decode("ascii", errors="replace")
    return token if read_teacher_token(token) is not None else None
