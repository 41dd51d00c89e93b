"""The server's cache of model results (captures, decoding traces), shared by every session.

One ``explorer.caching.ByteBudgetCache`` per server process (``st.cache_resource`` makes it a
singleton), bounded in bytes: ``EXPLORER_CACHE_MB`` (default 1024 MB). A sentence-length MiniLM capture
is about 0.2 MB and a 128-token one about 6 MB, so a class of 40 with a few texts each stays far below it
and their slider moves never run the model again; fourteen 512-token captures (70 MB each) fill it, and
the least recently used are then run again when asked for. Concurrent requests for the same result run
the model once.
"""

from __future__ import annotations

import os

import streamlit as st

from explorer.caching import MB, ByteBudgetCache

DEFAULT_BUDGET_MB = 1024


@st.cache_resource(show_spinner=False)
def results_cache() -> ByteBudgetCache:
    return ByteBudgetCache(int(os.environ.get("EXPLORER_CACHE_MB", DEFAULT_BUDGET_MB)) * MB)
