"""The server's cache of model results (captures, decoding traces), shared by every session.

One ``explorer.caching.ByteBudgetCache`` per server process (``st.cache_resource`` makes it a
singleton), bounded in bytes: ``EXPLORER_CACHE_MB`` (default 2048 MB: a class of 40 students each
holding a 128-token MiniLM capture (~6 MB) and a few decodings stays far below it, and even twenty-four
512-token captures fit). Concurrent requests for the same result run the model once.
"""

from __future__ import annotations

import os

import streamlit as st

from explorer.caching import MB, ByteBudgetCache

DEFAULT_BUDGET_MB = 2048


@st.cache_resource(show_spinner=False)
def results_cache() -> ByteBudgetCache:
    return ByteBudgetCache(int(os.environ.get("EXPLORER_CACHE_MB", DEFAULT_BUDGET_MB)) * MB)
