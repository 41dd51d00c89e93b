"""Attention heatmaps: one head's weights for the text you type, checked against a recomputation."""

import streamlit as st

import explorer
from explorer import ui
from explorer.compute.attention import score_stages
from explorer.render.heatmap import (
    mask_heatmap,
    masked_weights,
    scores_heatmap,
    verification_caption,
    weights_heatmap,
)
from explorer.render.style import FigureInfo
from explorer.ui.attention import capture_ui

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
view = capture_ui(lm, header)  # the text inputs, the capture (or a message) and the stack choice
capture, stack_name, stack = view.capture, view.stack_name, view.stack

with ui.controls():
    # The toggles' column holds "…ignoring the first row" whole at 1280 px beside the sidebar ("Stretch co…" once).
    layer_column, head_column, show_column, scale_column = st.columns([2, 2, 3, 3], vertical_alignment="bottom")
    with layer_column:
        layer = ui.index_slider_ui("Layer", stack.num_layers, key="layer", help="Counted from 0, input side first.")
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="head", help="Counted from 0.")
    with show_column:
        show = ui.choice_ui(
            "Show",
            list(SHOW),
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

where = (ui.STACK_LABELS[stack_name].lower(),) if len(capture.stacks) > 1 else ()
views = {"weights": "Attention weights", "scores": "Attention scores", "mask": "Attention mask"}
info = FigureInfo(
    views[show],
    model=lm.name,
    text=view.shown_text,
    where=(*where, f"layer {layer}") if show == "mask" else (*where, f"layer {layer}", f"head {head}"),
)
boundary = capture.segment_b_start if stack_name == "encoder" else None
boundaries = () if boundary is None else (boundary,)
# Builders keep only the matrix they draw (not the capture): exports run later, and a class of forty
# must not keep forty long captures alive through their download buttons.
query_tokens, key_tokens = stack.query_tokens, stack.key_tokens
if show == "weights":
    weights = masked_weights(stack, layer, head)
    build = ui.figure(
        weights_heatmap,
        weights,
        query_tokens,
        key_tokens,
        color_max=None if stretch else 1.0,
        info=info,
        boundaries=boundaries,
        skip_first_row=bool(skip_first),
    )
elif show == "scores":
    scores = score_stages(stack, layer, head)["masked"]
    build = ui.figure(
        scores_heatmap,
        scores,
        query_tokens,
        key_tokens,
        info=info,
        boundaries=boundaries,
    )
else:
    allowed = stack.masks_by_layer()[layer].copy()
    build = ui.figure(mask_heatmap, allowed, query_tokens, key_tokens, info=info)
with ui.stage():
    if show != "mask":
        ui.show_figure(build, info, key="heatmap", alt=f"{info.title()} of {info.subtitle()}")
    else:  # the chapter's pair: the mask of 1s and 0s, and beside it the scores it masks (−∞ where it is 0)
        mask_column, scores_column = st.columns(2)
        with mask_column:
            ui.show_figure(build, info, key="heatmap", alt=f"{info.title()} of {info.subtitle()}")
        scores_info = FigureInfo(
            "Masked scores", model=info.model, text=info.text, where=(*where, f"layer {layer}", f"head {head}")
        )
        with scores_column:
            scores = score_stages(stack, layer, head)["masked"]
            ui.show_figure(
                ui.figure(scores_heatmap, scores, query_tokens, key_tokens, info=scores_info, boundaries=boundaries),
                scores_info,
                key="masked-scores",
            )
        st.caption(
            "Left, the mask as the chapter writes it: 1 where a query may attend to a key, 0 where it may not "
            "(a causal model's is lower-triangular: no token sees the ones after it). The model turns it into "
            "something it adds to the scores, 0 where the mask is 1 and −∞ where it is 0, so that softmax gives "
            "those keys weight 0. Right: this head's scores after that addition."
        )

if view.target and stack_name in ("decoder", "cross"):  # an encoder-decoder's decoder, fed the target
    st.caption(
        "Rows are the decoder's input: the target text shifted right behind the decoder's start token (teacher "
        "forcing, as in training). The row of a token is the step that writes the next one: the start row "
        f"“{ui.literal(query_tokens[0])}” writes the first target token."
        + (
            " Read the cross-attention this way: which input words each output token was written from."
            if stack_name == "cross"
            else ""
        )
    )
error = ui.cached_verification(lm.name, view.text, view.text_pair, view.target)[stack_name]
check_column, size_column = st.columns([1, 2])
with check_column:
    st.metric(
        "Recomputed vs captured",
        f"{error:.1e}",
        help=(
            "Largest difference, over every layer and head, between the weights the model produced and "
            "softmax(scale · q·k + bias) recomputed from its own queries and keys."
        ),
    )
with size_column:
    st.caption(verification_caption(error, tolerance=stack.tolerance))
    st.caption(
        f"{len(stack.query_tokens)} query × {len(stack.key_tokens)} key tokens · "
        f"{stack.num_layers} layers × {stack.num_heads} heads"
    )
