"""Who may start a live class, and how often.

- **The teacher passphrase** (``EXPLORER_TEACHER_PASSPHRASE``, set by whoever runs the server): when it is set,
  "Start a live class" asks for it once per browser session; only its holders start classes, so students cannot
  fill the classes' limit. Unset, a hosted server (``EXPLORER_HOSTED=1``) starts no class at all, and a local
  run (a teacher's own laptop) starts them as before. Compared as SHA-256 digests in constant time; spaces
  around it are ignored, on both sides.
- **How often** (``StartLimits``): a browser session starts at most ``PER_SESSION`` classes, and a network
  address ``PER_ADDRESS``, in any ``WINDOW`` (token buckets refilled over the window). Loopback addresses are not
  limited: they are the teacher's own machine, or a reverse proxy in front of everyone. The buckets live in this
  process and are bounded (``buckets.MAX_BUCKETS``); the store's own limit (``MAX_CLASSES``) holds across servers. A
  session tries the passphrase at most ``PER_SESSION_GUESSES`` times in a window (by session only: a guesser
  behind the same address as a teacher never locks the teacher out).

No Streamlit here: the page's side is ``explorer.ui.classroom``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import os
import time
from collections.abc import Mapping

from explorer.classroom.buckets import TokenBuckets
from explorer.settings import PASSPHRASE

WINDOW = 600.0  # seconds
PER_SESSION = 3  # classes started per browser session in WINDOW
PER_ADDRESS = 10  # per network address
PER_SESSION_GUESSES = 5  # passphrase tries per browser session in WINDOW

OPEN, PASSPHRASE_NEEDED, CLOSED = "open", "passphrase", "closed"


def start_policy(hosted: bool, environ: Mapping[str, str] | None = None) -> str:
    """``PASSPHRASE_NEEDED`` when a passphrase is set; else ``CLOSED`` hosted and ``OPEN`` locally."""
    if configured(environ) is not None:
        return PASSPHRASE_NEEDED
    return CLOSED if hosted else OPEN


def configured(environ: Mapping[str, str] | None = None) -> str | None:
    """The digest of the server's teacher passphrase; None when it is unset or blank."""
    text = (os.environ if environ is None else environ).get(PASSPHRASE) or ""
    return digest(text) if text.strip() else None


def digest(text: str) -> str:
    # surrogatepass: a crafted message can carry a lone surrogate, which must hash (and mismatch), not raise.
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


def matches(given: object, expected: str | None) -> bool:
    """Whether ``given`` is the passphrase of digest ``expected``, in constant time (none matches no passphrase)."""
    if not isinstance(given, str) or expected is None or len(given) > 1_000:
        return False
    return hmac.compare_digest(digest(given), expected)


class StartLimits:
    """Token buckets by browser session and network address, each refilled over ``WINDOW``; ``clock`` for
    tests. ``per_address=0``: sessions only."""

    def __init__(self, per_session: int = PER_SESSION, per_address: int = PER_ADDRESS, clock=time.monotonic):
        self.per_session, self.per_address = per_session, per_address
        self._buckets = TokenBuckets(clock)

    def take(self, session: str | None, address: str | None) -> tuple[str, int] | None:
        """Counts one for ``session`` and ``address``: None when both had one left, else (whose limit it is,
        "session" or "address", and the minutes until it has one again), and nothing is counted."""
        wanted = [(f"session:{session}", self.per_session, "session")] if session else []
        if address and self.per_address and not _loopback(address):
            wanted.append((f"address:{address}", self.per_address, "address"))
        refused = self._buckets.take([(key, capacity, capacity / WINDOW) for key, capacity, _ in wanted])
        if refused is None:
            return None
        index, seconds = refused
        return wanted[index][2], max(1, math.ceil(seconds / 60))


def _loopback(address: str) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return (getattr(parsed, "ipv4_mapped", None) or parsed).is_loopback


STARTS = StartLimits()
GUESSES = StartLimits(PER_SESSION_GUESSES, 0)  # passphrase tries: by session only, so none locks out another
