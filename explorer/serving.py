"""A limit on concurrent model runs, so a class server's memory stays bounded and waits stay predictable.

Each forward pass (a capture, a decoding step loop, a verification) holds a few hundred MB at 512 tokens; forty
students pressing Enter at once must queue rather than all run together. ``FORWARD_GATE`` admits
``EXPLORER_MAX_CONCURRENT`` runs at a time (default: half the CPU cores, at least 1: two runs would each get
half the cores anyway, and run no faster together), and says how many are waiting so a page can show it.
"""

from __future__ import annotations

import gc
import os
import threading
from contextlib import contextmanager

from explorer import settings
from explorer.caching import MIB, nbytes

LARGE_RESULT = 16 * MIB  # a capture of about 250 MiniLM tokens


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
            result = compute()
            if nbytes(result) >= LARGE_RESULT:
                release_free_memory()
            return result

    @property
    def busy(self) -> bool:
        return self.running >= self.slots


def _malloc_trim():
    """glibc's ``malloc_trim``, or None elsewhere (macOS, Windows, musl)."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """After a model run: collect garbage cycles, then hand freed heap memory back to the system.

    Streamlit's own full collection after every script run is turned off (it cost a busy class server most
    of a core, see .streamlit/config.toml), so the namespaces of finished runs, which reference cycles keep
    alive, would hold their captures (70 MB at 512 tokens) until Python's collector happened to run: measured,
    forty long texts left 2.7 GB. One collection per model run is cheap beside the run itself and keeps
    memory bounded by the results cache. Only after large results (``LARGE_RESULT``): a class of short
    sentences leaves little behind, and a full collection with torch loaded takes a tenth of a second.
    ``malloc_trim`` then returns what glibc kept in its heaps.
    """
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


def freeze_long_lived() -> None:
    """After a model load: everything alive now (the imported libraries, the loaded models) moves out of reach of
    Python's cyclic garbage collector, so its full collections walk only what was made since.

    With torch, transformers, Streamlit and two models loaded the process holds about half a million objects,
    and a full collection of them took 250-300 ms holding the GIL: under a class, whenever one came due (every
    so many allocations) every student's run stopped for it, the longest single pause of a slider move (issue
    13). Unfrozen and collected first, so a model evicted since is freed and no garbage is kept forever."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def default_slots() -> int:
    # Read at import: a bad value is the default here, and the start refuses it (explorer.settings).
    return settings.number_or_default("EXPLORER_MAX_CONCURRENT", max(1, (os.cpu_count() or 2) // 2))


FORWARD_GATE = ForwardGate(default_slots())
