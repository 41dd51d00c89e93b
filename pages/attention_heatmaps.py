"""Attention heatmaps: one head's weights for the text you type, checked against a recomputation."""

import streamlit as st

import explorer
from explorer import ui
from explorer.render.heatmap import attention_heatmap, verification_caption
from explorer.render.style import FigureInfo

DEFAULT_TEXT = "time flies like an arrow"

ui.page_shell()
ui.page_header(
    "Attention heatmaps",
    "Each row is a query token, each column a key token; a cell is how much that query attends to that key "
    "in one head. Rows sum to 1. Blank cells are keys the query is not allowed to see.",
)

lm = ui.selected_model()
if lm is None:
    st.info("Pick a model in the sidebar to start.")
    st.stop()

text, text_pair, target = ui.text_inputs_ui(lm.kind, DEFAULT_TEXT, compact=ui.presenting())
if not text.strip():
    st.info("Type some text above to see which tokens each head attends to.")
    st.stop()
try:
    capture = ui.cached_capture(lm.name, text, text_pair, target)
except explorer.InputError as error:
    st.info(ui.literal(error))
    st.stop()

if capture.truncated:
    st.warning(
        f"The text is longer than {ui.literal(lm.name)} accepts ({lm.max_tokens} tokens): "
        f"the last {capture.truncated} tokens were cut."
    )
for note in capture.notes:
    st.caption(note)

stack_name = ui.stack_ui(list(capture.stacks))
stack = capture.stacks[stack_name]
layer_column, head_column, scale_column = st.columns([3, 3, 2], vertical_alignment="bottom")
with layer_column:
    layer = ui.index_slider_ui("Layer", stack.num_layers, key="layer", help="Counted from 0, input side first.")
with head_column:
    head = ui.index_slider_ui("Head", stack.num_heads, key="head", help="Counted from 0.")
with scale_column:
    stretch = ui.toggle_ui("Stretch colours", key="stretch", help="Darkest colour = this head's largest weight, not 1.")
ui.notices_ui()

where = (ui.STACK_LABELS[stack_name].lower(),) if len(capture.stacks) > 1 else ()
info = FigureInfo(
    "Attention weights",
    model=lm.name,
    text=" / ".join(part for part in (text, text_pair, target) if part),
    where=(*where, f"layer {layer}", f"head {head}"),
)
boundary = capture.segment_b_start if stack_name == "encoder" else None
ui.show_figure(
    lambda look: attention_heatmap(
        stack, layer, head, color_max=None if stretch else 1.0, info=info, look=look, segment_b_start=boundary
    ),
    info,
    key="heatmap",
    alt=f"Attention weights of layer {layer}, head {head}",
)

error = ui.cached_verification(lm.name, text, text_pair, target)[stack_name]
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
    st.caption(verification_caption(error))
    st.caption(
        f"{len(stack.query_tokens)} query × {len(stack.key_tokens)} key tokens · "
        f"{stack.num_layers} layers × {stack.num_heads} heads"
    )
