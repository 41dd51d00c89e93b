"""The next slides computed in the background (issue 28 §2): after ``compute_ahead``, the slide's result is in the
server's shared cache, so showing the slide runs no model; a slide that fails in the background leaves the
thread serving the next; the queue is bounded."""

from __future__ import annotations

import threading

import explorer
from explorer import gateway, views
from explorer.lecture import GENERATION, ahead


def test_a_slide_computed_ahead_is_shown_without_running_the_model(monkeypatch):
    gateway.results_cache().clear()
    view = views.decoding.Greedy(
        explorer.DEFAULT_DECODER, "A lecture ahead of time", (("strategy", "greedy"), ("max_new_tokens", 3))
    )
    assert ahead.compute_ahead([view]) == 1
    assert ahead.idle(120)

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran again")

    monkeypatch.setattr(explorer, "decode", no_model)
    trace = view.result()
    assert len(trace.generated_tokens[0]) == 3


def test_a_failing_slide_leaves_the_background_working():
    broken = views.decoding.Greedy("no/such-model-here", "text", (("strategy", "greedy"), ("max_new_tokens", 2)))
    fine = views.sampling.Temperatures(explorer.DEFAULT_DECODER, "Ahead, after a failure")
    gateway.results_cache().clear()
    ahead.compute_ahead([broken, fine])
    assert ahead.idle(120)
    assert fine.result().prompt == "Ahead, after a failure"


def test_the_queue_is_bounded_and_a_queued_slide_is_not_queued_twice(monkeypatch):
    release, started = threading.Event(), []

    def held(view):  # the background thread stays on its first view until released
        started.append(view)
        release.wait(30)
        with ahead._lock:
            ahead._queued.discard(view)

    monkeypatch.setattr(ahead, "_compute", held)
    slides = [slide.view for slide in GENERATION.slides]
    distinct = list(dict.fromkeys(slides))
    assert ahead.compute_ahead(distinct[:6] + distinct[:2]) == ahead.MAX_QUEUED
    assert ahead.compute_ahead(distinct[:2]) == 0  # queued already
    release.set()
    assert ahead.idle(60)
    assert started == distinct[: ahead.MAX_QUEUED]
