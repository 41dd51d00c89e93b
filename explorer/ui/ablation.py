"""Head ablation for the pages: each head's effect, computed once per (model, prompt) for the whole server,
with progress; the next-token logits with some heads ablated; a click on the map toggling a head."""

from __future__ import annotations

import streamlit as st

import explorer
from explorer.serving import FORWARD_GATE
from explorer.ui.caches import results_cache
from explorer.ui.clicks import clicked_point, selection_key
from explorer.ui.decoding import progress_bar
from explorer.ui.models import cached_model
from explorer.ui.widgets import head_pairs, set_value

MAP = "ablation-map"


def cached_effects(model_name: str, prompt: str) -> explorer.HeadAblationEffects:
    """``head_ablation_effects`` (one forward pass per batch of heads), shared by every session, with a progress bar
    while it runs."""
    key = ("ablation effects", model_name, prompt)
    cache = results_cache()
    if key in cache:
        return cache.get(key, lambda: None)
    lm = cached_model(model_name)
    with progress_bar("Ablating each head in turn: {done} of {total} heads") as progress:
        return cache.get(
            key, lambda: FORWARD_GATE.run(lambda: explorer.head_ablation_effects(lm, prompt, progress=progress))
        )


def cached_ablated_logits(model_name: str, prompt: str, heads: tuple) -> explorer.NextTokenLogits:
    """The next-token logits with ``heads`` ((layer, head), ...) ablated, once per (model, prompt, heads)."""
    lm = cached_model(model_name)
    key = ("ablated logits", model_name, prompt, heads)
    if key in results_cache():
        return results_cache().get(key, lambda: None)
    with st.spinner("Running the model with those heads ablated…"):
        return results_cache().get(
            key, lambda: FORWARD_GATE.run(lambda: explorer.next_token_logits(lm, prompt, ablate=heads))
        )


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
