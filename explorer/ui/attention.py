"""What the attention pages share: the text inputs, the cached capture, the stack choice, and links to a head.

``capture_ui`` draws the text inputs (a second segment for encoders, the decoder's text for
encoder-decoders), runs (or reuses) the capture, says what was cut, and lets the visitor pick a stack. It
stops the page with a short message when there is nothing to show.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import explorer
from explorer.ui.captures import cached_capture
from explorer.ui.shell import controls, presenting
from explorer.ui.text import literal
from explorer.ui.widgets import stack_ui, text_inputs_ui

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


def capture_ui(lm, header=None, *, default_text: str = DEFAULT_TEXT, stacks: bool = True) -> CaptureView:
    """Text inputs, capture and stack choice for ``lm``; stops the page when there is nothing to show."""
    text, text_pair, target = text_inputs_ui(
        lm.kind, default_text, compact=presenting(), slot=header, model_name=lm.name
    )
    if not text.strip():
        st.info("Type some text above to see its attention.")
        st.stop()
    try:
        capture = cached_capture(lm.name, text, text_pair, target)
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
