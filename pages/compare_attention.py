"""Compare: the same layer and head for two texts, or for two models on one text, side by side."""

import streamlit as st

import explorer
from explorer import ui, views

ui.page_shell()
ui.page_header(
    "Compare",
    "The same layer and head side by side: for two texts (how one head treats different sentences), or for two "
    "models on the same text (how two models spread their attention).",
)
lm = ui.require_model()
with ui.controls():
    mode = ui.choice_ui(
        "Compare",
        ["texts", "models"],
        key="compare",
        captions={"texts": "two texts, this model", "models": "one text, two models"},
    )
    first_column, second_column = st.columns(2)
    with first_column:
        text_a = ui.text_ui(
            "Text" if mode == "models" else "First text", "time flies like an arrow", key="text", height=68
        )
    with second_column:
        if mode == "texts":
            text_b = ui.text_ui("Second text", "fruit flies like a banana", key="text_b", height=68)
            other = lm.name
        else:
            text_b = text_a
            choices = [name for name in ui.bundled_choices() if name != lm.name] or [lm.name]
            other = ui.choice_ui("Second model", choices, key="model_b", horizontal=False)
if not text_a.strip() or not text_b.strip():
    ui.notices_ui()
    st.info("Type the text(s) to compare.")
    st.stop()
try:
    second_model = ui.cached_model(other)
    captures = [ui.run_model("capture", lm.name, text_a), ui.run_model("capture", other, text_b)]
except (explorer.InputError, explorer.ModelLoadError) as error:
    ui.notices_ui()
    st.info(ui.literal(error))
    st.stop()
layers = min(c.main.num_layers for c in captures)
heads = min(c.main.num_heads for c in captures)
with ui.controls():
    layer_column, head_column, stretch_column = st.columns([3, 3, 2], vertical_alignment="bottom")
    with layer_column:
        layer = ui.index_slider_ui("Layer", layers, key="layer")
    with head_column:
        head = ui.index_slider_ui("Head", heads, key="head")
    with stretch_column:
        stretch = ui.toggle_ui("Stretch colours", key="stretch")
ui.notices_ui()
# Keys by side, not by object: two identical texts share one cached capture.
with ui.stage():
    sides = zip(("a", "b"), st.columns(2), captures, (lm.name, other), (text_a, text_b), strict=True)
    for side, column, capture, name, text in sides:
        with column:
            side_view = views.attention.Side(name, text, layer=layer, head=head, stretch=stretch)
            ui.show_view(side_view, capture, key=f"compare-{side}", tall=True)
if mode == "models" and second_model.num_layers != lm.num_layers:
    st.caption(f"The two models differ in depth: layers shown go up to {layers - 1}, heads up to {heads - 1}.")
