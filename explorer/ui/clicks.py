"""Clicks on figures: a point a visitor clicked, taken once.

A clickable figure is drawn with ``show_figure(..., select_key=selection_key(name))``; on the rerun the
click causes, ``clicked_point(name)`` returns the point (its ``customdata``) and moves the figure to a new
selection key, so the selection is cleared and the same point can be clicked again.
"""

from __future__ import annotations

import streamlit as st

_COUNTS = "_click_counts"  # {figure name: clicks taken}


def selection_key(name: str) -> str:
    return f"{name}-select-{st.session_state.get(_COUNTS, {}).get(name, 0)}"


def clicked_point(name: str) -> list | None:
    """The ``customdata`` of the point clicked on figure ``name`` since the last run, or None."""
    state = st.session_state.get(selection_key(name)) or {}
    points = (state.get("selection") or {}).get("points") or []
    if not points or "customdata" not in points[0]:
        return None
    counts = st.session_state.setdefault(_COUNTS, {})
    counts[name] = counts.get(name, 0) + 1
    data = points[0]["customdata"]
    # A figure's typed array (NumPy data) reaches the page as {"0": ..., "1": ...}: read it as a list.
    return [data[key] for key in sorted(data, key=int)] if isinstance(data, dict) else list(data)
