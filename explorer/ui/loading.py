"""The app's first line: drawn while a server's first run imports torch and transformers (about 6 s).

Importing this module draws it (``explorer.ui`` imports it first), which happens once per server process, in
the first visitor's first run; ``clear`` takes it away once the app is drawn. Until then that visitor sees
what is happening rather than a blank page (Streamlit's own list of page files is switched off in
``.streamlit/config.toml``: ``client.showSidebarNavigation = false``).
"""

from __future__ import annotations

import threading

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

LOADING_LINE = "Starting the Attention & Decoding Explorer: loading PyTorch and the model (once per server start)…"
_first = threading.local()  # the line's placeholder, in the script thread of the run that drew it


def draw() -> None:
    """Draw the loading line in the page's first slot (a no-op outside a script run, as in plain imports)."""
    if get_script_run_ctx() is None:
        return
    _first.placeholder = st.empty()
    _first.placeholder.caption(LOADING_LINE)


def clear() -> None:
    """Take the loading line away, in the run that drew it (later runs never had it)."""
    placeholder = getattr(_first, "placeholder", None)
    if placeholder is not None:
        _first.placeholder = None
        placeholder.empty()


draw()  # on import: see above
