"""BertViz's head view and model view, working offline, for any supported model."""

import streamlit as st

import explorer
from explorer import ui, views
from explorer.ui.attention import DEFAULT_PAIR, run_capture_ui

LONG = 128  # tokens: past this, line views are limited to chosen layers or heads
ui.page_shell()
header = ui.page_header(
    "Head and model views",
    "BertViz's views (Vig, 2019). The head view draws, for one layer, a line from each token (left) to each "
    "token it attends to (right), darker for larger weights, one colour per head: hover a token to see only its "
    "lines. The model view shows every layer and head as small line drawings: click one to enlarge it. For a "
    "sentence pair, the Attention menu filters A→A, B→B, A→B and B→A.",
)
lm = ui.require_model()
ui.apply_pending_preset(lm.name)
ui.preset_notice()
ui.preset_button(
    "Chapter preset: head view of “time flies like an arrow” / “fruit flies like a banana”, head 8 (bert-base-uncased)",
    model="bert-base-uncased",
    fallback=explorer.DEFAULT_ENCODER,
    values={"text": "time flies like an arrow", "pair": DEFAULT_PAIR, "bv_view": "head", "bv_head": 8},
)
view = run_capture_ui(lm, header, stacks=False)
capture = view.capture
with ui.controls():
    which = ui.choice_ui("View", ["head", "model"], key="bv_view")
stack = capture.main
tokens = max(len(s.query_tokens) for s in capture.stacks.values())
with ui.controls():
    layer_column, head_column = st.columns(2)
    with layer_column:
        if tokens > LONG or which == "head":
            layer = ui.layer_slider_ui(stack, key="bv_layer")
            layers = [layer]
        else:
            layers = None
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="bv_head", help="The head selected at first.")
ui.notices_ui()
if tokens > LONG:
    st.info(
        f"{tokens} tokens: line views are drawn for the chosen layer only (layer {layers[0]}); heatmaps stay usable "
        "at any length on the Attention heatmaps page."
    )
with ui.stage():
    # On a projector the head view is enlarged to the room the window leaves (thicker lines too), and its lines
    # stretched to the window's width.
    bertviz = views.attention.BertViz(
        lm.name, view.text, view.text_pair, view.target, view.stack_name, which, layers and tuple(layers), head
    )
    look = ui.figure_look("bertviz") if which == "head" and ui.presenting() else None
    zoom = bertviz.zoom(capture, look.height) if look else 1.0
    st.iframe(bertviz.html(capture, zoom, look.width if look else None), height=bertviz.height(capture, zoom))
    ui.export_buttons(bertviz.figure(capture), bertviz.info(capture), key="bertviz")
st.caption(
    "Drawn by BertViz's own JavaScript, served with this page (no internet needed); weights are sent to the "
    "browser at 8-bit precision (±0.002), which line darkness cannot show anyway."
)
