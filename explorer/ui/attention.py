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
from explorer import display_name
from explorer.compute.statistics import head_statistics, kept_mass, without_tokens
from explorer.compute.tokens import unknown_share
from explorer.ui.caches import results_cache
from explorer.ui.results import run_model
from explorer.ui.shell import controls, presenting
from explorer.ui.text import literal
from explorer.ui.widgets import EXAMPLES, set_value, stack_ui, text_inputs_ui
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
            f"The text is longer than {literal(display_name(lm.name))} accepts ({lm.max_tokens} tokens): "
            f"the last {capture.truncated} tokens were cut."
        )
    for note in capture.notes:
        st.caption(literal(note))
    unknown_tokens_ui(lm, capture.token_ids)
    names = list(capture.stacks)
    with controls():
        stack_name = stack_ui(names) if stacks else names[0]
    return CaptureView(text, text_pair, target, capture, stack_name, capture.stacks[stack_name])


def require_vectors_ui(stack) -> None:
    """Stop the page with a note where ``stack`` holds weights alone: a view of queries and keys has nothing to
    draw (the capture's note, shown above, says why)."""
    if stack.weights_only:
        st.info(
            "This view needs the queries and keys the scores are computed from, and they are not available for "
            "this architecture. The heatmaps, all heads, BertViz, statistics and rollout pages show its weights."
        )
        st.stop()


def decoder_rows_caption(stack, stack_name: str, weights: np.ndarray) -> str:
    """What an encoder-decoder's decoder rows are (the target shifted right: each row predicts the next token),
    and for cross-attention an example from the head shown, ``weights`` [query, key] (NaN where masked): the row
    with the strongest single weight on a word, the word it reads and the token it writes. Rows that write a word
    come first (the start row and punctuation show the shift less clearly)."""
    rows = stack.query_tokens
    said = (
        "Rows are the decoder's input: the target text shifted right behind the decoder's start token (teacher "
        "forcing, as in training). Each row is the token from which the decoder predicts the next one: the start "
        f"row “{literal(rows[0])}” writes the first target token."
    )
    if stack_name != "cross" or len(rows) < 2:
        return said
    peaks = np.nan_to_num(weights[:-1], nan=-1.0)  # the last row writes nothing the target shows
    wordy = (
        np.array([any(c.isalnum() for c in token) for token in rows[1:]])[:, None]
        & np.array([any(c.isalnum() for c in token) for token in stack.key_tokens])[None, :]
    )
    wordy[0] = False  # the start row: the clearest example is a row that is itself a target token
    row, key = np.unravel_index(int(np.argmax(np.where(wordy, peaks, peaks - 2.0))), peaks.shape)
    return said + (
        " So a row of cross-attention shows which input words the decoder reads to write the token after it: "
        f"here row “{literal(rows[row])}” reads “{literal(stack.key_tokens[key])}” "
        f"({float(weights[row, key]):.2f}) because it writes “{literal(rows[row + 1])}”."
    )


def unknown_tokens_ui(lm, token_ids) -> None:
    """One line when most of a text's tokens are unknown to the model (each one the same ``<unk>``, whatever the
    word), with a button for the model's own example text where it has one."""
    tokenizer = lm.tokenizer
    unknown, total = unknown_share(token_ids, tokenizer.unk_token_id, tokenizer.all_special_ids)
    if 2 * unknown <= total:
        return
    st.caption(
        f"{unknown} of this text's {total} tokens are unknown to {literal(display_name(lm.name))}: it reads each as "
        f"{literal(tokenizer.unk_token)}, the same token whatever the word, so its attention cannot tell them apart. "
        "Its vocabulary does not hold these words: give it text of the kind it was trained on."
    )
    if lm.name in EXAMPLES:
        text, target = EXAMPLES[lm.name]
        st.button(
            f"Use {display_name(lm.name)}'s own example: “{text}” → “{target}”",
            on_click=_use_example,
            args=(text, target),
            icon=":material/lightbulb:",
        )


def _use_example(text: str, target: str) -> None:
    set_value("text", text)
    set_value("target", target)


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
            weights, kept, mass = allowed_weights(view.stack, layer)[None], None, None
            if hidden:
                mass = kept_mass(weights, hidden)
                weights, kept = without_tokens(weights, hidden)
            measured = head_statistics(weights, special_positions, key_positions=kept, kept=mass)
            rows += [{**row, "layer": view.stack.layer_number(layer)} for row in measured]  # the model's number
        return rows

    return results_cache().get(_derived_key(view, "head statistics", hidden), compute)


def cached_rollout(view: CaptureView) -> np.ndarray:
    """[layer, query, key] attention rollout of the view's (square) stack, up to each layer."""

    return results_cache().get(_derived_key(view, "rollout"), lambda: rollout_by_layer(view.stack))


def open_head_links(view: CaptureView, layer: int, head: int) -> None:
    """Links that open one head (``layer``: its index in the view's stack) in the heatmap and step-by-step pages (same
    text, same model), named by the model's own layer number as the pages' sliders and URLs are."""
    layer = view.stack.layer_number(layer)
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
