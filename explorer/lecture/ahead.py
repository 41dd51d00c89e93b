"""The next slide ready before the presenter moves: its result computed in the background.

While a slide shows, ``compute_ahead`` hands the slides around it to one background thread, which computes
their results through the gateway (the server's shared cache): when the presenter moves, the page finds the
result there and only draws. One thread for the whole server, and a short queue: under a class, background
work must never crowd out what visitors are waiting for (the gateway's forward gate serves them first in
order anyway), and a slide nobody moves to is not worth queueing behind forty others.

``EXPLORER_LECTURE_AHEAD=0`` in the server's environment turns it off: ``bench/bench_lecture.py`` measures the
moves without it beside the moves with it.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

MAX_QUEUED = 4

_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-lecture-ahead")
_lock = threading.Lock()
_queued: set = set()
_log = logging.getLogger(__name__)


def compute_ahead(views) -> int:
    """Queue each view's result (views are frozen, so they are their own key); returns how many were queued."""
    if os.environ.get("EXPLORER_LECTURE_AHEAD") == "0":
        return 0
    queued = 0
    with _lock:
        for view in views:
            if view in _queued or len(_queued) >= MAX_QUEUED:
                continue
            _queued.add(view)
            _pool.submit(_compute, view)
            queued += 1
    return queued


def _compute(view) -> None:
    try:
        view.result()
    except Exception:  # a slide that fails shows its own message when visited; the background only warms
        _log.debug("computing a slide ahead failed", exc_info=True)
    finally:
        with _lock:
            _queued.discard(view)


def idle(timeout: float = 60.0) -> bool:
    """Wait until nothing is queued (tests and benchmarks); whether it emptied within ``timeout`` seconds."""
    done = threading.Event()
    _pool.submit(done.set)
    return done.wait(timeout)
