"""Attention heatmaps: one head's weights for the text you type, checked against a recomputation."""

import dataclasses

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui.attention import decoder_rows_caption, run_capture_ui

SHOW = {
    "weights": "after softmax",
    "scores": "before softmax; −∞ where masked",
    "mask": "added to the scores",
}


# Which decoder token reads which input word: the bundled seq2seq model's last cross-attention layer, averaged
# over nothing (one head), shows the year, month and day copied from where they stand in the written date.
CROSS_PRESET = {
    "text": "Thursday, March 5, 2021",
    "target": "2021-03-05",
    "stack": "cross",
    "show": "weights",
    "layer": 1,
    "head": 0,
}

ui.page_shell()
header = ui.page_header(
    "Attention heatmaps",
    "Each row is a query token, each column a key token; a cell is how much that query attends to that key "
    "in one head. Rows sum to 1. Blank cells are keys the query is not allowed to see.",
)

lm = ui.require_model()

ui.apply_pending_preset(lm.name)
ui.preset_notice()
ui.preset_button(
    "Chapter preset: the 5 × 5 causal mask (gpt2, “time flies like an arrow”)",
    model="openai-community/gpt2",
    fallback=explorer.DEFAULT_DECODER,
    values={"text": "time flies like an arrow", "show": "mask", "layer": 0, "head": 0},
    fallback_values={"text": "She was not at home", "show": "mask", "layer": 0, "head": 0},
)
ui.preset_button(
    "Cross-attention: the bundled date converter (“Thursday, March 5, 2021” → “2021-03-05”)",
    model=explorer.DEFAULT_SEQ2SEQ,
    fallback=explorer.DEFAULT_SEQ2SEQ,
    values=CROSS_PRESET,
    key="cross-preset",
)
view = run_capture_ui(lm, header)  # the text inputs, the capture (or a message) and the stack choice
capture, stack_name, stack = view.capture, view.stack_name, view.stack

with ui.controls():
    # The toggles' column holds "…ignoring the first row" whole at 1280 px beside the sidebar ("Stretch co…" once).
    layer_column, head_column, show_column, scale_column = st.columns([2, 2, 3, 3], vertical_alignment="bottom")
    with layer_column:
        layer = ui.layer_slider_ui(stack, key="layer", help="Counted from 0, input side first.")
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="head", help="Counted from 0.")
    with show_column:
        show = ui.choice_ui(
            "Show",
            ["weights"] if stack.weights_only else list(SHOW),  # scores and the mask's pair need queries and keys
            key="show",
            help="Weights: after softmax. Scores: scale · q·k + bias before softmax, with −∞ where the mask forbids "
            "attending. Mask: what is added to the scores.",
        )
    with scale_column:
        stretch = ui.toggle_ui(
            "Stretch colours", key="stretch", help="Darkest colour = this head's largest weight, not 1."
        )
        skip_first = (
            stack.is_causal
            and stretch
            and ui.toggle_ui(
                "…ignoring the first row",
                key="skip_first",
                help="In a causal model the first token can only attend to itself (weight 1 in every head): leave it "
                "out of the colour scale so later rows are readable.",
            )
        )
ui.notices_ui()

head_view = views.attention.Head(
    lm.name, view.text, view.text_pair, view.target, stack_name, layer, head, show, stretch, bool(skip_first)
)
info = head_view.info(capture)
query_tokens = stack.query_tokens
with ui.stage():
    if show != "mask":
        ui.show_view(head_view, capture, key="heatmap", alt=f"{info.title()} of {info.subtitle()}")
    else:  # the chapter's pair: the mask of 1s and 0s, and beside it the scores it masks (−∞ where it is 0)
        mask_column, scores_column = st.columns(2)
        with mask_column:
            ui.show_view(head_view, capture, key="heatmap", alt=f"{info.title()} of {info.subtitle()}")
        with scores_column:
            ui.show_view(dataclasses.replace(head_view, show="masked scores"), capture, key="masked-scores")
        st.caption(
            "Left, the mask as the chapter writes it: 1 where a query may attend to a key, 0 where it may not "
            "(a causal model's is lower-triangular: no token sees the ones after it). The model turns it into "
            "something it adds to the scores, 0 where the mask is 1 and −∞ where it is 0, so that softmax gives "
            "those keys weight 0. Right: this head's scores after that addition."
        )

if view.target and stack_name in ("decoder", "cross"):  # an encoder-decoder's decoder, fed the target
    with ui.explanation():  # "What am I looking at?" in presentation mode
        st.caption(decoder_rows_caption(stack, stack_name, views.attention.masked_weights(stack, layer, head)))
error = head_view.check(progress=ui.shown_progress)
check_column, size_column = st.columns([1, 2])
with check_column:
    st.metric(
        "Recomputed vs captured",
        "n/a" if stack.weights_only else f"{error:.1e}",
        help=(
            "Largest difference, over every layer and head, between the weights the model produced and "
            "softmax(scale · q·k + bias) recomputed from its own queries and keys."
        ),
    )
with size_column:
    st.caption(head_view.check_caption(capture, error))
    st.caption(
        f"{len(stack.query_tokens)} query × {len(stack.key_tokens)} key tokens · "
        f"{stack.num_layers} layers × {stack.num_heads} heads"
    )
