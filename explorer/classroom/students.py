"""Who a class poll counts: students' ids that the server issues, one per browser, at a bounded pace.

- **Issued, signed ids.** A poll counts only ids its store issued (``ClassStore.new_student``: 96 random bits and
  their HMAC under the store's secret, ``codes``). The browser keeps its id in localStorage and presents it again
  on a reload, a rejoin or a second tab, so those are the same student; an id a visitor makes up counts nothing.
- **One id per session.** A browser session votes as the first issued id its browser presented, or else as the
  one issued to it (once); whatever ids it presents later, it keeps voting as that one, so one session adds at
  most one voter to a poll (``explorer.ui.classroom`` keeps the id in the session's state).
- **A bounded pace** (``MintLimits``): a session that needs an id takes one from its network address's token
  bucket: ``BURST`` at once, then ``PER_SECOND``. Students behind one school router share an address: a class of
  40, or two of them, opening the link in the same minute get their ids at once, and the 101st new browser of a
  burst waits half a second. Only new browsers draw (a reload presents the kept id), so an honest class never
  waits long, and one that does is told to answer again in a few seconds, never locked out. A visitor who opens
  session after session to collect ids gets 100, then 2 a second: 500 voters (a poll's ``MAX_VOTERS``) take
  over three minutes from one address, instead of seconds. Loopback (``None``: the server's own machine, or a
  reverse proxy on it carrying everyone) is one address. The buckets live in each server's memory and are
  bounded (``buckets.MAX_BUCKETS``).

No Streamlit here: the page's side is ``explorer.ui.classroom``.
"""

from __future__ import annotations

import math
import time

from explorer.classroom.buckets import TokenBuckets

BURST = 100  # new ids at once per network address: two classes of 40+ behind one school router
PER_SECOND = 2.0  # after the burst: a class of 300 behind one address all have ids within 100 s


class MintLimits:
    """Token buckets of new students' ids by network address (``None``, unknown or loopback, is one address);
    ``clock`` for tests."""

    def __init__(self, burst: int = BURST, per_second: float = PER_SECOND, clock=time.monotonic):
        self.burst, self.per_second = burst, per_second
        self._buckets = TokenBuckets(clock)

    def take(self, address: str | None) -> float | None:
        """Counts one new id for ``address``: None when it had one left, else the seconds until it has one (and
        nothing is counted)."""
        refused = self._buckets.take([(address, self.burst, self.per_second)])
        return None if refused is None else math.ceil(refused[1] * 10) / 10


MINTS = MintLimits()
