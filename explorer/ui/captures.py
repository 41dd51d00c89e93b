"""Captures cached for every session: moving a layer or head widget never runs the model again.

``cached_capture(model_name, text, text_pair, target)`` returns one object shared by every session (never
copied; its arrays are read-only, so sharing is safe), keyed by everything that changes its result, from the
server's byte-bounded results cache. Model runs go through ``serving.FORWARD_GATE`` so a class cannot run
forty at once. ``cached_verification`` is the recomputation check, once per capture.
"""

from __future__ import annotations

import streamlit as st

import explorer
from explorer.serving import FORWARD_GATE
from explorer.ui.caches import results_cache
from explorer.ui.models import cached_model


def cached_capture(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> explorer.AttentionCapture:
    """``explorer.capture`` of the cached model, run once per distinct input for the whole server (a byte-bounded
    cache, see ``ui.caches``); concurrent requests for one input run the model once. Arrays are read-only."""
    lm = cached_model(model_name)
    key = ("capture", model_name, text, text_pair, target)

    def capture_and_verify():
        # The check runs in the same slot as the capture: a session must not hold a long capture while it
        # queues a second time behind the class for its verification (forty of them would pile up in memory).
        result = explorer.capture(lm, text, text_pair=text_pair, target=target)
        results_cache().get(_verification_key(key), lambda: _verify(result))
        return result

    return run_shared(key, capture_and_verify, "Running the model…")


def _verification_key(capture_key: tuple) -> tuple:
    return ("verification", *capture_key[1:])


def _verify(result: explorer.AttentionCapture) -> dict[str, float]:
    return {name: stack.verify(result.device) for name, stack in result.stacks.items()}


def cached_verification(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> dict[str, float]:
    """{stack: max |recomputed - captured|}, computed once per capture (about 1 s at 512 tokens)."""
    key = _verification_key(("capture", model_name, text, text_pair, target))
    if key in results_cache():
        return results_cache().get(key, lambda: None)
    result = cached_capture(model_name, text, text_pair, target)  # verifies as it captures
    return run_shared(key, lambda: _verify(result), "Checking the captured weights…")


def run_shared(key, compute, label: str):
    """A cached result, or the computation run through the server's gate with a spinner that says it waits."""
    cache = results_cache()
    if key in cache:
        return cache.get(key, compute)
    waiting = FORWARD_GATE.waiting + (1 if FORWARD_GATE.busy else 0)
    note = f" (waiting for {waiting} other request{'s' if waiting != 1 else ''} first)" if waiting else ""
    with st.spinner(label + note):
        return cache.get(key, lambda: FORWARD_GATE.run(compute))
