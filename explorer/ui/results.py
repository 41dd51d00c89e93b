"""The pages' side of the gateway: ``run_model`` is ``explorer.gateway.run`` with the page's progress, and
``run_view`` / ``show_view`` do the same for a view (``explorer.views``): its result, then its figure.

A cache hit draws nothing. A run this session has to compute shows, while it waits and runs, a spinner with
the job's label and how many requests wait first ("Running the model… (waiting for 3 other requests first)");
a decoding or an ablation sweep shows a progress bar of the steps done instead ("Generating: 3 of 8 tokens").
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import streamlit as st

from explorer import gateway
from explorer.ui.figures import show_figure

PROGRESS_EVERY_S = 0.25


def run_model(kind: str, model_name: str, *inputs, **settings):
    """The result of ``kind`` (a key of ``gateway.JOBS``) for these inputs, shared by every session."""
    return gateway.run(kind, model_name, *inputs, progress=shown_progress, **settings)


@contextmanager
def shown_progress(label: str, waiting: int, unit: str | None):
    """The progress of one run (the gateway's ``Progress``): a spinner, or a progress bar for jobs with steps."""
    note = f" (waiting for {waiting} other request{'s' if waiting != 1 else ''} first)" if waiting else ""
    if unit is None:
        with st.spinner(label + note):
            yield None
        return
    with progress_bar(unit, waiting=label + note if waiting else None) as step:
        yield step


@contextmanager
def progress_bar(unit: str, *, waiting: str | None = None):
    """A progress bar for the block, which receives ``step(done, total)`` ("Generating: 3 of 8 tokens" for
    ``unit`` "Generating: {done} of {total} tokens"); at 0 with ``waiting`` as its text while the run queues;
    gone when the block ends."""
    bar = st.empty()
    if waiting:
        bar.progress(0.0, text=waiting)
    shown = [-PROGRESS_EVERY_S]

    def step(done: int, total: int) -> None:
        # The first step at once (the bar appears), then at most every PROGRESS_EVERY_S: each update is a message
        # to the browser, and forty students' decodings sent thousands a second.
        now = time.monotonic()
        if now - shown[0] >= PROGRESS_EVERY_S:
            shown[0] = now
            bar.progress(done / total, text=unit.format(done=done, total=total))

    try:
        yield step
    finally:
        bar.empty()


def run_view(view):
    """The result a view (``explorer.views``) draws, with this page's progress while it is computed."""
    return view.result(progress=shown_progress)


def show_view(view, result, *, key: str, **options) -> object:
    """The view's figure of ``result`` sized to the window, with its exports (``ui.show_figure``)."""
    return show_figure(view.figure(result), view.info(result), key=key, **options)
