"""The server's shared caches of models and model results (captures, decoding traces), for every session.

``results_cache()`` is one ``explorer.caching.ByteBudgetCache`` per server process, bounded in bytes:
``EXPLORER_CACHE_MB`` (default 1024 MB). A sentence-length MiniLM capture is about 0.2 MB and a 128-token one
about 6 MB, so a class of 40 with a few texts each stays far below it and their slider moves never run the model
again; fourteen 512-token captures (70 MB each) fill it, and the least recently used are then run again when
asked for. Concurrent requests for the same result run the model once. ``models_cache()`` keeps the loaded
models, a few at most.
"""

from __future__ import annotations

import functools
import os

from explorer.caching import MB, ByteBudgetCache

DEFAULT_BUDGET_MB = 1024
MAX_MODELS = 3  # loaded models kept at once (each is hundreds of MB)


# Process-wide singletons, not ``st.cache_resource``: any visitor can send Streamlit's clear-cache request (a
# menu item, or one websocket message), which empties every ``st.cache_*`` for the whole class. These survive it.
@functools.cache
def results_cache() -> ByteBudgetCache:
    return ByteBudgetCache(int(os.environ.get("EXPLORER_CACHE_MB", DEFAULT_BUDGET_MB)) * MB)


@functools.cache
def models_cache() -> ByteBudgetCache:
    """Loaded models by name, least recently used dropped beyond ``MAX_MODELS`` (each entry and key counts 1)."""
    return ByteBudgetCache(2 * MAX_MODELS, size_of=lambda value: 1)
