"""Batched event-loop wake-ups (explorer.ui.wakeups): every callback runs once, in each thread's order, with far
fewer wake-ups than callbacks, and a failing callback does not stop the rest."""

from __future__ import annotations

import asyncio
import threading
import types

import streamlit
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.runtime import Runtime

from explorer.ui import wakeups


class CountingLoop:
    """A real event loop in its own thread, counting the wake-ups written to it."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.wakeups = 0
        self.errors: list[BaseException] = []
        self.loop.set_exception_handler(lambda loop, context: self.errors.append(context.get("exception")))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        real = self.loop.call_soon_threadsafe

        def counted(*args):
            self.wakeups += 1
            return real(*args)

        self.loop.call_soon_threadsafe = counted

    def finish(self) -> None:
        done = threading.Event()
        self.loop.call_soon_threadsafe(done.set)
        assert done.wait(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_every_callback_runs_once_in_its_threads_order_with_fewer_wakeups():
    counting, session = CountingLoop(), types.SimpleNamespace()
    ran: list[tuple[int, int]] = []
    threads, per_thread = 8, 400

    def produce(worker: int) -> None:
        for n in range(per_thread):
            wakeups.call_soon_batched(session, counting.loop, lambda worker=worker, n=n: ran.append((worker, n)))

    producers = [threading.Thread(target=produce, args=(w,)) for w in range(threads)]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.join()
    counting.finish()
    assert len(ran) == threads * per_thread
    for worker in range(threads):
        assert [n for w, n in ran if w == worker] == list(range(per_thread))
    assert counting.wakeups - 1 < threads * per_thread  # batches, not one wake-up per callback (-1: finish's)


def test_a_failing_callback_is_reported_and_the_rest_still_run():
    counting, session = CountingLoop(), types.SimpleNamespace()
    ran = []
    gate = threading.Event()
    # Hold the loop so that the three callbacks land in one batch.
    counting.loop.call_soon_threadsafe(gate.wait)
    wakeups.call_soon_batched(session, counting.loop, lambda: ran.append(1))
    wakeups.call_soon_batched(session, counting.loop, lambda: 1 / 0)
    wakeups.call_soon_batched(session, counting.loop, lambda: ran.append(3))
    gate.set()
    counting.finish()
    assert ran == [1, 3]
    assert len(counting.errors) == 1 and isinstance(counting.errors[0], ZeroDivisionError)


def test_install_patches_this_streamlit_once_and_leaves_another_alone(monkeypatch):
    assert wakeups.install() and wakeups.install()  # idempotent
    assert AppSession._call_soon_on_event_loop is wakeups._call_soon_on_event_loop
    assert Runtime._enqueued_some_message is wakeups._enqueued_some_message
    monkeypatch.setattr(streamlit, "__version__", "9.0.0")
    assert not wakeups.install()
