"""What the attention pages share: the text inputs, the cached capture, the stack choice, and links to a head.

``run_capture_ui`` draws the text inputs (a second segment for encoders, the decoder's text for
encoder-decoders), runs (or reuses) the capture, says what was cut, and lets the visitor pick a stack. It
stops the page with a short message when there is nothing to show. ``cached_head_statistics`` and
``cached_rollout`` are computed from every head of a capture, so once per capture for the whole server, not at
every slider move: at 500 tokens each run made copies of all the weights (70-140 MB), and forty students'
moves at once held gigabytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

import explorer
from explorer.compute.statistics import head_statistics, without_tokens
from explorer.ui.caches import results_cache
from explorer.ui.results import run_model
from explorer.ui.shell import controls, presenting
from explorer.ui.text import literal
from explorer.ui.widgets import stack_ui, text_inputs_ui
from explorer.views.attention import allowed_weights, rollout_by_layer

DEFAULT_TEXT = "time flies like an arrow"
DEFAULT_PAIR = "fruit flies like a banana"


@dataclass(frozen=True)
class CaptureView:
    """The inputs a page was given and the capture of them (``stack`` is the one chosen to show)."""

    text: str
    text_pair: str | None
    target: str | None
    capture: explorer.AttentionCapture
    stack_name: str
    stack: object

    @property
    def shown_text(self) -> str:
        return " / ".join(part for part in (self.text, self.text_pair, self.target) if part)


def run_capture_ui(lm, header=None, *, default_text: str = DEFAULT_TEXT, stacks: bool = True) -> CaptureView:
    """Text inputs, the capture (run or reused, through the gateway) and stack choice for ``lm``; stops the page
    when there is nothing to show."""
    text, text_pair, target = text_inputs_ui(
        lm.kind, default_text, compact=presenting(), slot=header, model_name=lm.name
    )
    if not text.strip():
        st.info("Type some text above to see its attention.")
        st.stop()
    try:
        capture = run_model("capture", lm.name, text, text_pair, target)
    except explorer.InputError as error:
        st.info(literal(error))
        st.stop()
    if capture.truncated:
        st.warning(
            f"The text is longer than {literal(lm.name)} accepts ({lm.max_tokens} tokens): "
            f"the last {capture.truncated} tokens were cut."
        )
    for note in capture.notes:
        st.caption(literal(note))
    names = list(capture.stacks)
    with controls():
        stack_name = stack_ui(names) if stacks else names[0]
    return CaptureView(text, text_pair, target, capture, stack_name, capture.stacks[stack_name])


def _derived_key(view: CaptureView, *what) -> tuple:
    """A result computed from ``view``'s stack: keyed by everything its capture is keyed by, and the stack."""
    return ("derived", *what, view.capture.model_name, view.text, view.text_pair, view.target, view.stack_name)


# Both are computed a layer at a time, at once rather than queued behind the class's model runs: a session
# waiting in the queue would hold its capture (90 MB at 500 tokens) all that while, and copies of every layer
# at once made 200-400 MB of temporaries per session.
def cached_head_statistics(view: CaptureView, special_positions: tuple[int, ...], *, hide: bool) -> list[dict]:
    """``head_statistics`` of every head of the view's stack; ``hide``: with the special tokens' columns
    dropped and rows renormalised (``without_tokens``)."""
    hidden = special_positions if hide else ()

    def compute():
        rows = []
        for layer in range(view.stack.num_layers):
            weights, kept = allowed_weights(view.stack, layer)[None], None
            if hidden:
                weights, kept = without_tokens(weights, hidden)
            measured = head_statistics(weights, special_positions, key_positions=kept)
            rows += [{**row, "layer": layer} for row in measured]
        return rows

    return results_cache().get(_derived_key(view, "head statistics", hidden), compute)


def cached_rollout(view: CaptureView) -> np.ndarray:
    """[layer, query, key] attention rollout of the view's (square) stack, up to each layer."""

    return results_cache().get(_derived_key(view, "rollout"), lambda: rollout_by_layer(view.stack))


def open_head_links(view: CaptureView, layer: int, head: int) -> None:
    """Links that open one head in the heatmap and step-by-step pages (same text, same model)."""
    params = {"text": view.text, "layer": str(layer), "head": str(head)}
    if view.text_pair:
        params["pair"] = view.text_pair
    if view.target:
        params["target"] = view.target
    if view.stack_name != "encoder" and len(view.capture.stacks) > 1:
        params["stack"] = view.stack_name
    model = st.query_params.get("model")
    if model:
        params["model"] = model
    left, middle, right = st.columns(3)
    left.page_link(
        "pages/attention_heatmaps.py",
        label=f"Open layer {layer}, head {head} as a heatmap",
        query_params=params,
        icon=":material/grid_on:",
    )
    middle.page_link(
        "pages/attention_step_by_step.py", label="…step by step", query_params=params, icon=":material/functions:"
    )
    right.page_link(
        "pages/neuron_view.py", label="…in the neuron view", query_params=params, icon=":material/blur_linear:"
    )
