"""Neuron view: a query and every key as coloured bands, their element-wise product, the dot product and softmax."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui.attention import require_vectors_ui, run_capture_ui

ui.page_shell()
header = ui.page_header(
    "Neuron view",
    "Inside one head, for one query token: each component of the query vector (top band) multiplies the same "
    "component of every key vector; summing those products gives the dot product q·k. It is scaled (by "
    "1/√head_dim in most models, not in T5), a position bias is added where the model has one (T5), masked keys "
    "get −∞, and softmax turns the result into attention weights. Orange is positive, blue negative: where query "
    "and key agree in sign, the product is orange and the score rises.",
)
lm = ui.require_model()
ui.apply_pending_preset(lm.name)
ui.preset_notice()
ui.preset_button(
    "Chapter preset: “time flies like an arrow”, layer 0, head 8, query “flies” (bert-base-uncased)",
    model="bert-base-uncased",
    fallback=explorer.DEFAULT_ENCODER,
    values={"text": "time flies like an arrow", "layer": 0, "head": 8, "query": 2, "pair": ""},
)
view = run_capture_ui(lm, header)
stack = view.stack
require_vectors_ui(stack)
with ui.controls():
    layer_column, head_column, query_column = st.columns(3)
    with layer_column:
        layer = ui.layer_slider_ui(stack, key="layer")
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="head")
    with query_column:
        query = ui.index_slider_ui("Query token", len(stack.query_tokens), key="query")
ui.notices_ui()
neuron = views.attention.Neuron(lm.name, view.text, view.text_pair, view.target, view.stack_name, layer, head, query)
with ui.stage():
    ui.show_view(neuron, view.capture, key="neuron")
st.caption(neuron.caption(view.capture))
