"""Captures cached for every session: moving a layer or head widget never runs the model again.

``cached_capture(model_name, text, text_pair, target)`` is ``st.cache_resource`` (one object shared by
every session, never copied; its arrays are read-only, so sharing is safe), keyed by everything that
changes its result. ``cached_verification`` is the recomputation check, once per capture.
"""

from __future__ import annotations

import streamlit as st

import explorer
from explorer.ui.models import cached_model


# Captures hold [layer, head, query, key] arrays (75 MB for MiniLM at 512 tokens): keep a few, briefly.
@st.cache_resource(max_entries=8, ttl="1h", show_spinner="Running the model…")
def cached_capture(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> explorer.AttentionCapture:
    """``explorer.capture`` of the cached model, run once per distinct input; arrays are read-only."""
    return explorer.capture(cached_model(model_name), text, text_pair=text_pair, target=target)


@st.cache_data(max_entries=64, show_spinner="Checking the captured weights…")
def cached_verification(
    model_name: str, text: str, text_pair: str | None = None, target: str | None = None
) -> dict[str, float]:
    """{stack: max |recomputed - captured|}, computed once per capture (about 1 s at 512 tokens)."""
    result = cached_capture(model_name, text, text_pair, target)
    return {name: stack.verify() for name, stack in result.stacks.items()}
