"""Fewer wake-ups of Streamlit's event loop: a class's messages stop queueing for the GIL (issue 13).

Streamlit hands every element a script draws to its event loop with ``loop.call_soon_threadsafe``, and the
loop signals its sender the same way for every message it queues. Each call writes a byte to the loop's wake-up
socket: a system call, during which the calling thread gives up the GIL and after which it waits to get it
back. With forty students' script runs busy, each of those waits lasts up to Python's switch interval, several
milliseconds, so a page of forty elements spent most of its time waiting, twice: once in its script thread and
once in the event loop (measured with ``bench/bench_class.py --profile-waits``: a quarter of the event loop's
time was that one write, and a slider move whose run computed for 25 ms took 0.2 s to run and 0.3 s more to
reach the browser).

Two changes, same callbacks in the same order:

- A session's callbacks are queued in order and handed to the loop in batches: a wake-up is written only when
  no batch is already waiting to run, and the batch runs every callback queued by then, in order.
- The loop thread sets the runtime's "messages to send" flag directly instead of scheduling that on itself.

``install()`` patches Streamlit's ``AppSession`` and ``Runtime`` once, and only the version these
were written against (a different Streamlit keeps its own behaviour: the patch is skipped).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable

import streamlit
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.runtime import Runtime

PATCHED_VERSION = "1.67."  # the Streamlit whose AppSession._call_soon_on_event_loop and
# Runtime._enqueued_some_message these replace (read them again before any upgrade)
_LOGGER = logging.getLogger(__name__)
_installed = threading.Lock()
_BATCH = "_explorer_batch"
_new_batch = threading.Lock()


class CallbackBatch:
    """Callbacks waiting for one event loop, in the order they were queued."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pending: deque[Callable[[], None]] = deque()
        self.scheduled = False

    def add(self, callback: Callable[[], None]) -> bool:
        """Queue ``callback``; True when the caller must schedule ``run`` on the loop (none is waiting)."""
        with self.lock:
            self.pending.append(callback)
            if self.scheduled:
                return False
            self.scheduled = True
            return True

    def run(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop: every callback queued so far, in order; one that raises is reported like asyncio does."""
        with self.lock:
            callbacks = list(self.pending)
            self.pending.clear()
            self.scheduled = False
        for callback in callbacks:
            try:
                callback()
            except Exception as error:  # asyncio logs a failing callback and goes on: so does a batch
                loop.call_exception_handler({"message": "Exception in a batched callback", "exception": error})


def call_soon_batched(session, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """``loop.call_soon_threadsafe(callback)``, batched per ``session``: same order, fewer wake-ups."""
    batch = session.__dict__.get(_BATCH)
    if batch is None:
        with _new_batch:
            batch = session.__dict__.setdefault(_BATCH, CallbackBatch())
    if batch.add(callback):
        loop.call_soon_threadsafe(batch.run, loop)


def _call_soon_on_event_loop(self, callback: Callable[[], None]) -> None:
    try:
        call_soon_batched(self, self._event_loop, callback)
    except RuntimeError:  # as Streamlit's own: events after the loop closed (shutdown) are dropped
        if not self._event_loop.is_closed():
            raise
        _LOGGER.debug("Dropped event-loop callback", exc_info=True)


def _enqueued_some_message(self) -> None:
    objects = self._get_async_objs()
    if _running_loop() is objects.eventloop:
        objects.need_send_data.set()  # already on the loop: no wake-up needed
    else:
        objects.eventloop.call_soon_threadsafe(objects.need_send_data.set)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def install() -> bool:
    """Patch Streamlit once (idempotent); False when its version is not the one these were written for."""
    if not streamlit.__version__.startswith(PATCHED_VERSION):
        return False
    with _installed:
        if getattr(AppSession._call_soon_on_event_loop, "__module__", "") != __name__:
            AppSession._call_soon_on_event_loop = _call_soon_on_event_loop
            Runtime._enqueued_some_message = _enqueued_some_message
        # The running server's session manager holds the runtime's callback, bound when it started, and hands
        # it to every new session: give it the new one (sessions already open keep theirs).
        manager = getattr(Runtime.instance(), "_session_mgr", None) if Runtime.exists() else None
        if manager is not None and hasattr(manager, "_message_enqueued_callback"):
            manager._message_enqueued_callback = functools.partial(_enqueued_some_message, Runtime.instance())
    return True
