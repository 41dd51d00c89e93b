"""A thread-safe cache for model results, bounded in bytes, where concurrent requests for one key share one run.

Captures and decoding traces are large (a 512-token MiniLM capture holds about 85 MB of arrays) and are
read-only once built, so one object can serve every session. Two properties matter on a class server:

- **Bounded in bytes**, not entries: ten long captures and a thousand short ones cost very different
  memory. Least recently used entries are dropped once the total passes the budget; an entry larger than
  the whole budget is returned but not kept.
- **Single flight**: when forty students open the same link at once, the model runs once and the other
  thirty-nine wait for that result instead of each starting their own run.

``nbytes`` estimates a record's size by walking its dataclass fields, dicts, tuples and lists down to the
NumPy arrays. No Streamlit here: the pages' ``ui`` modules wrap these caches.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

MIB = 2**20  # bytes in a MiB (EXPLORER_CACHE_MB counts these)


def nbytes(value, _seen: set[int] | None = None) -> int:
    """Bytes held by the NumPy arrays (plus a small allowance per Python object) reachable from ``value``."""
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return 64 + sum(nbytes(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return 64 + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        if value and set(map(type, value)) == {str}:
            # A vocabulary's tokens (tens of thousands) at C speed: 4 ms a result in Python, under a class.
            return 56 + 49 * len(value) + sum(map(len, value))
        return 56 + sum(nbytes(item, seen) for item in value)
    if isinstance(value, str):
        return 49 + len(value)
    return 32


class _Flight:
    """One run in progress: its waiters block on ``done``; an ordinary failure leaves only its type and args."""

    __slots__ = ("done", "failure", "finished", "value")

    def __init__(self):
        self.done = threading.Event()
        self.failure: tuple[type[Exception], tuple] | None = None
        self.finished = False
        self.value = None


def _fresh(failure: tuple[type[Exception], tuple]) -> Exception:
    """A new exception like the failed run's, without its traceback (whose frames would keep the run's objects)."""
    kind, args = failure
    try:
        return kind(*args)
    except Exception:  # an exception class whose constructor wants other arguments
        return RuntimeError(*args)


class ByteBudgetCache:
    """``get(key, compute)``: the cached value for ``key``, computing it once however many threads ask at once.

    Failures are never cached. An ordinary error (an ``Exception``: bad input, a model that cannot load) reaches
    the callers that were waiting on that one run, as a fresh exception of the same type and message, and the
    next caller tries again. An *interruption* (a ``BaseException`` that is not an ``Exception``: Streamlit stops
    a script run by raising one inside it when its visitor moves a widget or closes the tab) belongs to the
    interrupted caller only: its waiters are woken and one of them runs the computation instead.
    """

    def __init__(self, budget_bytes: int, *, size_of: Callable[[object], int] = nbytes):
        self.budget = int(budget_bytes)
        self.size_of = size_of
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._pending: dict[Hashable, _Flight] = {}
        self._lock = threading.Lock()
        self.total = 0
        self.hits = self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], object]):
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return self._entries[key][0]
                flight = self._pending.get(key)
                if flight is None:
                    flight = self._pending[key] = _Flight()
                    self.misses += 1
                    break
            flight.done.wait()
            if flight.failure is not None:
                raise _fresh(flight.failure)
            if flight.finished:
                return flight.value  # also when it was too large to keep
            # Interrupted: look again, and run it if nobody else has started to.
        return self._run(key, flight, compute)

    def offer(self, key: Hashable, compute: Callable[[], object]) -> None:
        """Compute and keep ``key``'s value, unless it is kept or being computed already: never waits on another
        run (a caller holding a gate slot must not wait for a run that queues for that slot)."""
        with self._lock:
            if key in self._entries or key in self._pending:
                return
            flight = self._pending[key] = _Flight()
            self.misses += 1
        self._run(key, flight, compute)

    def _run(self, key: Hashable, flight: _Flight, compute: Callable[[], object]):
        try:
            value = compute()
        except Exception as error:
            flight.failure = (type(error), error.args)
            self._land(key, flight)
            raise
        except BaseException:
            self._land(key, flight)  # interrupted: the waiters find no value and no failure, and run it
            raise
        flight.value, flight.finished = value, True
        self._store(key, value)
        self._land(key, flight)
        return value

    def _land(self, key: Hashable, flight: _Flight) -> None:
        with self._lock:
            if self._pending.get(key) is flight:
                del self._pending[key]
        flight.done.set()

    def _store(self, key: Hashable, value) -> None:
        # The key counts too: it holds the visitor's text.
        size = self.size_of(value) + self.size_of(key)
        with self._lock:
            if key in self._entries:
                self.total -= self._entries.pop(key)[1]
            if size <= self.budget:
                self._entries[key] = (value, size)
                self.total += size
                while self.total > self.budget and self._entries:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self.total -= dropped

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.total = 0
