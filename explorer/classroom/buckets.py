"""Token buckets by key, for the class's rate limits (``teachers``: starts and passphrase tries; ``students``: new
students' ids): each bucket holds at most its capacity and refills at its rate; the least recently used are
dropped past ``MAX_BUCKETS``, so a flood of new keys cannot grow a server's memory."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence

MAX_BUCKETS = 10_000

# A bucket asked for: its key, its capacity, and its refill in tokens per second.
Bucket = tuple[Hashable, float, float]


class TokenBuckets:
    """``clock`` for tests."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._levels: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()  # key -> (tokens, when)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._levels)

    def take(self, wanted: Sequence[Bucket]) -> tuple[int, float] | None:
        """One token from each bucket of ``wanted``, all or none: None when each had one, else (the index of the
        first that had none, the seconds until it has one), and nothing is taken."""
        with self._lock:
            now = self.clock()
            levels = [self._level(key, capacity, rate, now) for key, capacity, rate in wanted]
            for index, (tokens, (_key, _capacity, rate)) in enumerate(zip(levels, wanted, strict=True)):
                if tokens < 1:
                    return index, (1 - tokens) / rate
            for tokens, (key, _capacity, _rate) in zip(levels, wanted, strict=True):
                self._levels[key] = (tokens - 1, now)
                self._levels.move_to_end(key)
            while len(self._levels) > MAX_BUCKETS:  # the least recently used first
                self._levels.popitem(last=False)
        return None

    def _level(self, key: Hashable, capacity: float, rate: float, now: float) -> float:
        tokens, when = self._levels.get(key, (capacity, now))
        return min(capacity, tokens + (now - when) * rate)
