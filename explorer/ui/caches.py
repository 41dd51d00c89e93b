"""The server's shared caches of models and model results (captures, decoding traces), for every session.

``results_cache()`` is one ``explorer.caching.ByteBudgetCache`` per server process, bounded in bytes:
``EXPLORER_CACHE_MB`` (default 1024 MB, 512 MB in hosted mode). A sentence-length MiniLM capture is about 0.2 MB
and a 128-token one about 6 MB, so a class of 40 with a few texts each stays far below either and their slider
moves never run the model again; five or ten 500-token captures (90 MB each) fill it, and the least recently used
are then run again when asked for. Hosted mode keeps less because a class server's memory is shared by forty
sessions that each hold the result they are drawing: with forty 500-token texts at once, 1024 MB of kept results
took the server past 3 GB (issue 13). Concurrent requests for the same result run the model once.
``models_cache()`` keeps the loaded models, a few at most.
"""

from __future__ import annotations

import functools
import os

from explorer.caching import MB, ByteBudgetCache
from explorer.hosting import POLICY

DEFAULT_BUDGET_MB = 1024
HOSTED_BUDGET_MB = 512
MAX_MODELS = 3  # loaded models kept at once (each is hundreds of MB)


# Process-wide singletons, not ``st.cache_resource``: any visitor can send Streamlit's clear-cache request (a
# menu item, or one websocket message), which empties every ``st.cache_*`` for the whole class. These survive it.
@functools.cache
def results_cache() -> ByteBudgetCache:
    default = HOSTED_BUDGET_MB if POLICY.hosted else DEFAULT_BUDGET_MB
    return ByteBudgetCache(int(os.environ.get("EXPLORER_CACHE_MB", default)) * MB)


@functools.cache
def models_cache() -> ByteBudgetCache:
    """Loaded models by name, least recently used dropped beyond ``MAX_MODELS`` (each entry and key counts 1)."""
    return ByteBudgetCache(2 * MAX_MODELS, size_of=lambda value: 1)
