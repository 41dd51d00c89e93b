"""A class's code (what students type or scan), the teacher's key (what moves the class), and a student's id.

The code is short and read aloud or off a projector, so its alphabet leaves out the look-alikes 0 O 1 I L:
31 letters and digits, 6 of them, about 887 million codes. It is public: knowing it only lets one follow. The
key is the teacher's secret (192 random bits in the teacher's link): stores keep its SHA-256 digest, never the
key, and compare digests in constant time, so neither a leaked store nor a stopwatch gives the key away.

A student's id is what a poll counts, so the server issues it, never the browser: 96 random bits and their
HMAC-SHA256 (cut to 128 bits) under the store's secret (``ClassStore.student_secret``), as ``NONCE-MAC`` in
lower-case hex (57 characters). Without the secret nobody makes one that checks, so writing ids into a browser's
storage or a websocket message counts nothing; the browser keeps the id it was given (``explorer.ui.classroom``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
# A URL parameter longer than any key we hand out is refused before hashing (a megabyte of "key" is not hashed).
MAX_KEY_LENGTH = 200
# The shape of a student's id, checked before anything is looked up (a signed id is one of this shape).
_STUDENT_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_SIGNED_STUDENT = re.compile(r"([0-9a-f]{24})-([0-9a-f]{32})")  # NONCE-MAC
_STUDENT_NONCE_BYTES = 12
_STUDENT_MAC_CHARS = 32  # 128 bits of the HMAC: a forger's guess succeeds once in 2**128
# Compared against when the key is unusable, so a refused key costs the same comparison as a wrong one.
_NO_DIGEST = "0" * 64


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def new_key() -> str:
    """24 random bytes, URL-safe (32 characters): 192 bits, well past the 128 a guess must face."""
    return secrets.token_urlsafe(24)


def normalize_code(text: object) -> str | None:
    """A code as typed (spaces around it, lower case) in its canonical form; None unless it is one."""
    if not isinstance(text, str):
        return None
    code = text.strip().upper()
    return code if len(code) == CODE_LENGTH and all(char in ALPHABET for char in code) else None


def key_digest(key: str) -> str:
    # surrogatepass: a crafted URL can carry a lone surrogate, which must hash (and mismatch), not raise.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_matches(key: object, digest: str | None) -> bool:
    """Whether ``key`` is the key of ``digest``, compared in constant time; a missing, empty or over-long key is
    never a match, and takes the same comparison as a wrong one."""
    usable = isinstance(key, str) and 0 < len(key) <= MAX_KEY_LENGTH
    candidate = key_digest(key) if usable else _NO_DIGEST
    same = hmac.compare_digest(candidate, digest or _NO_DIGEST)
    return usable and bool(digest) and same


def is_student_id(text: object) -> bool:
    """Whether ``text`` has a student id's shape (signed or not: ``is_signed_student_id`` says whether it counts)."""
    return isinstance(text, str) and _STUDENT_ID.fullmatch(text) is not None


def new_student_id(secret: bytes) -> str:
    """A new student's id, signed with ``secret``."""
    return sign_student(secrets.token_hex(_STUDENT_NONCE_BYTES), secret)


def sign_student(nonce: str, secret: bytes) -> str:
    """The student id of ``nonce`` (24 lower-case hex digits) under ``secret``: ``NONCE-MAC``."""
    mac = hmac.new(secret, b"explorer-student:" + nonce.encode("ascii"), hashlib.sha256).hexdigest()
    return f"{nonce}-{mac[:_STUDENT_MAC_CHARS]}"


def is_signed_student_id(text: object, secret: bytes) -> bool:
    """Whether ``text`` is a student id signed with ``secret`` (its MAC compared in constant time); a forged,
    truncated, altered or other secret's id is not."""
    match = _SIGNED_STUDENT.fullmatch(text) if isinstance(text, str) else None
    return match is not None and hmac.compare_digest(sign_student(match[1], secret), text)
