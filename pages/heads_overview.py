"""All heads: every layer and head of the model as one figure of thumbnails; pick one to open it."""

import dataclasses

import streamlit as st

from explorer import ui, views
from explorer.ui.attention import open_head_links, run_capture_ui
from explorer.views.attention import MAX_THUMBNAIL

ui.page_shell()
header = ui.page_header(
    "All heads",
    "Every head of every layer at once: a row of thumbnails per layer, a column per head, each the head's "
    "attention matrix (queries down, keys across). Patterns jump out: heads that look at the previous token (a "
    "diagonal just below the main one), at the first token (a dark first column), or broadly. Click a "
    "thumbnail to open that head.",
)
lm = ui.require_model()
view = run_capture_ui(lm, header)
stack = view.stack
tokens = len(stack.query_tokens)
if max(tokens, len(stack.key_tokens)) > MAX_THUMBNAIL:
    st.info(
        f"{tokens} tokens: each thumbnail shows blocks of tokens averaged into {MAX_THUMBNAIL} × {MAX_THUMBNAIL} "
        "cells (the browser could not show more). Open a head for every token."
    )
with ui.controls():
    layer_column, head_column = st.columns(2)
    with layer_column:
        layer = ui.layer_slider_ui(stack, key="layer")
    with head_column:
        head = ui.index_slider_ui("Head", stack.num_heads, key="head")
ui.notices_ui()
grid = views.attention.AllHeads(lm.name, view.text, view.text_pair, view.target, view.stack_name)
with ui.stage():
    figure = dataclasses.replace(grid, selected=(layer, head)).figure(view.capture)(look=ui.figure_look("grid"))
    event = st.plotly_chart(
        figure,
        theme=None,
        key="grid",
        width="content",
        on_select="rerun",
        selection_mode="points",
        config={"displaylogo": False},
    )
    ui.export_buttons(grid.figure(view.capture), grid.info(view.capture), key="grid")
points = (
    (event or {}).get("selection", {}).get("points", [])
    if isinstance(event, dict)
    else getattr(getattr(event, "selection", None), "points", [])
)
picked = next((p.get("customdata") for p in points if p.get("customdata")), None)
if picked and tuple(picked) != (layer, head):
    ui.set_value("layer", stack.layer_number(int(picked[0])))  # the slider shows the model's own numbers
    ui.set_value("head", int(picked[1]))
    st.rerun()
st.markdown(f"**Layer {stack.layer_number(layer)}, head {head}** selected.")
open_head_links(view, layer, head)
