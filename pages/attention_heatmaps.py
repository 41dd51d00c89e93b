"""Attention heatmaps: one head's weights for the text you type, checked against a recomputation."""

import streamlit as st

import explorer
from explorer import ui
from explorer.render.heatmap import attention_heatmap, verification_caption

DEFAULT_TEXT = "time flies like an arrow"

ui.page_shell()

st.title("Attention heatmaps")
st.caption(
    "Each row is a query token, each column a key token; a cell is how much that query attends to that key "
    "in one head. Rows sum to 1. Blank cells are keys the query is not allowed to see."
)

lm = ui.selected_model()
if lm is None:
    st.info("Pick a model in the sidebar to start.")
    st.stop()

text, text_pair, target = ui.text_inputs_ui(lm.kind, DEFAULT_TEXT)

if not text.strip():
    st.info("Type some text above to see which tokens each head attends to.")
    st.stop()
try:
    capture = ui.cached_capture(lm.name, text, text_pair, target)
except explorer.InputError as error:
    st.info(str(error))
    st.stop()

if capture.truncated:
    st.warning(
        f"The text is longer than `{lm.name}` accepts ({lm.max_tokens} tokens): "
        f"the last {capture.truncated} tokens were cut."
    )
for note in capture.notes:
    st.caption(note)

stack_name = ui.stack_ui(list(capture.stacks))
stack = capture.stacks[stack_name]
layer_column, head_column, scale_column = st.columns([2, 2, 1], vertical_alignment="bottom")
with layer_column:
    layer = ui.index_slider_ui("Layer", stack.num_layers, key="layer", help="Counted from 0, input side first.")
with head_column:
    head = ui.index_slider_ui("Head", stack.num_heads, key="head", help="Counted from 0.")
with scale_column:
    stretch = st.toggle("Stretch colours", key="stretch", help="Darkest colour = this head's largest weight, not 1.")

chart_column, facts_column = st.columns([4, 1])
with chart_column:
    figure = attention_heatmap(stack, layer, head, color_max=None if stretch else 1.0)
    st.plotly_chart(
        figure,
        theme=None,
        key="heatmap",
        width="content",
        alt=f"Attention weights of layer {layer}, head {head}",
        config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}},
    )
with facts_column:
    error = ui.cached_verification(lm.name, text, text_pair, target)[stack_name]
    st.metric(
        "Recomputed vs captured",
        f"{error:.1e}",
        help=(
            "Largest difference, over every layer and head, between the weights the model produced and "
            "softmax(scale · q·k + bias) recomputed from its own queries and keys."
        ),
    )
    st.caption(verification_caption(error))
    st.caption(
        f"{len(stack.query_tokens)} query × {len(stack.key_tokens)} key tokens · "
        f"{stack.num_layers} layers × {stack.num_heads} heads"
    )
