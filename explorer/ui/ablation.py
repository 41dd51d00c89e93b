"""Head ablation for the pages: a click on the map toggling a head. (Each head's effect and the logits with
heads ablated come from the gateway: ``ui.run_model("ablation effects" | "logits", ...)``.)"""

from __future__ import annotations

import streamlit as st

from explorer.ui.clicks import clicked_point, selection_key
from explorer.ui.widgets import head_pairs, set_value

MAP = "ablation-map"


def map_selection_key() -> str:
    return selection_key(MAP)


def take_click(*, key: str) -> None:
    """If a head of the map was clicked since the last run, toggle it in the heads widget ``key`` (before the
    widget is drawn, so it shows the new set and writes it into the link)."""
    point = clicked_point(MAP)
    if point is None:
        return
    layer, head = (int(value) for value in point[:2])
    before = set(head_pairs(st.session_state.get(key, [])))
    set_value(key, tuple(sorted(before ^ {(layer, head)})))
