"""A limit on concurrent model runs, so a class server's memory stays bounded and waits stay predictable.

Each forward pass (a capture, a decoding step loop, a verification) holds a few hundred MB at 512 tokens; forty
students pressing Enter at once must queue rather than all run together. ``FORWARD_GATE`` admits
``EXPLORER_MAX_CONCURRENT`` runs at a time (default: half the CPU cores, at least 1: two runs would each get
half the cores anyway, and run no faster together), and says how many are waiting so a page can show it.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager


class ForwardGate:
    """A counting semaphore that knows how many callers are running and waiting."""

    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self._semaphore = threading.BoundedSemaphore(self.slots)
        self._count = threading.Lock()
        self.running = 0
        self.waiting = 0

    @contextmanager
    def slot(self):
        with self._count:
            self.waiting += 1
        self._semaphore.acquire()
        with self._count:
            self.waiting -= 1
            self.running += 1
        try:
            yield
        finally:
            with self._count:
                self.running -= 1
            self._semaphore.release()

    def run(self, compute):
        with self.slot():
            return compute()

    @property
    def busy(self) -> bool:
        return self.running >= self.slots


def default_slots() -> int:
    configured = os.environ.get("EXPLORER_MAX_CONCURRENT")
    if configured and configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, (os.cpu_count() or 2) // 2)


FORWARD_GATE = ForwardGate(default_slots())
