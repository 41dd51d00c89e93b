"""Head ablation for the pages: each head's effect, computed once per (model, prompt) for the whole server,
with progress; the next-token logits with some heads ablated; a click on the map toggling a head."""

from __future__ import annotations

import time

import streamlit as st

import explorer
from explorer.serving import FORWARD_GATE
from explorer.ui.caches import results_cache
from explorer.ui.clicks import clicked_point, selection_key
from explorer.ui.decoding import PROGRESS_EVERY_S
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
    bar = st.empty()
    shown = [-PROGRESS_EVERY_S]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - shown[0] >= PROGRESS_EVERY_S:
            shown[0] = now
            bar.progress(done / total, text=f"Ablating each head in turn: {done} of {total} heads")

    try:
        return cache.get(
            key, lambda: FORWARD_GATE.run(lambda: explorer.head_ablation_effects(lm, prompt, progress=progress))
        )
    finally:
        bar.empty()


def _effects(lm, prompt: str, progress) -> explorer.HeadAblationEffects:
    return explorer.head_ablation_effects(lm, prompt, stack="decoder", progress=progress)


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
