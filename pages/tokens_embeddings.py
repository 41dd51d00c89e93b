"""Tokens and embeddings: how text becomes vectors, and how context changes a token's vector layer by layer."""

import pandas as pd
import streamlit as st

import explorer
from explorer import ui, views
from explorer.compute.anatomy import shape_trail
from explorer.compute.tokens import split_words
from explorer.ui.attention import DEFAULT_PAIR, DEFAULT_TEXT, unknown_tokens_ui

ID_FIGURE = "id_figure"  # the token-id figure's section: its key and link parameter

ui.page_shell()
header = ui.page_header(
    "Tokens and embeddings",
    "The tokenizer cuts text into tokens and gives each an id; the model looks each id up in its embedding "
    "matrix (one row of numbers per token) and adds where the token sits, with learned position embeddings, "
    "a fixed sinusoidal encoding, or (rotary models) by turning each query and key. After each layer a token's "
    "vector has mixed in its context: the same word ends up with different vectors in different sentences.",
)
lm = ui.require_model()

with ui.controls():
    text = ui.text_ui("Text", DEFAULT_TEXT, key="text", height=68)
    pair = ui.text_ui("Second segment (optional)", "", key="pair", height=68) if lm.kind == "encoder" else ""
ui.notices_ui()
if not text.strip():
    st.info("Type some text to see its tokens.")
    st.stop()
try:
    embeddings = views.tokens.Embeddings(lm.name, text, pair or None)
    vectors = ui.run_view(embeddings)  # tokens, embeddings, the first layer's input
except explorer.InputError as error:
    st.info(ui.literal(error))
    st.stop()

rows, found = vectors.rows, vectors.embeddings
st.subheader("The tokenization")
table = pd.DataFrame([row.__dict__ for row in rows]).rename(columns={"token_id": "id", "start": "from", "end": "to"})
for column in ("from", "to"):  # special tokens stand for no characters: an empty cell, not "None"
    table[column] = ["" if value is None or pd.isna(value) else str(int(value)) for value in table[column]]
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={"token": st.column_config.TextColumn(help="␣ marks a space the token starts with")},
)
st.caption(f"{len(rows)} tokens, {sum(r.special for r in rows)} of them special (added by the tokenizer).")
# The lecture's figure of this table (anatomy, slide 1): lazy, so the page costs nothing more until it is opened
# (Esc on that slide opens it: ``explorer.ui.full_page``).
ids_section = ui.expander_ui("Token ids, as the lecture draws them", key=ID_FIGURE, icon=":material/pin:")
if ids_section.open:
    with ids_section:
        ui.show_view(views.anatomy.TokenIds(lm.name, text, pair or None), vectors, key="token-ids")
unknown_tokens_ui(ui.cached_model(lm.name), [row.token_id for row in rows])
split = split_words(text, rows)
if split:  # a small vocabulary (the bundled decoder has 8,192 tokens, gpt2 50,257) cuts common words too
    st.caption(
        f"{ui.literal(ui.display_name(lm.name))}'s vocabulary holds {ui.run_model('anatomy', lm.name).vocabulary:,} "
        "tokens: a word it has no token for is cut into pieces it has, so "
        + "; ".join(
            f"“{ui.literal(word)}” becomes {' + '.join(ui.literal(p) for p in pieces)}" for word, pieces in split
        )
        + ". The smaller the vocabulary, the more words are cut."
    )

ids = [row.token_id for row in rows]

st.subheader("From ids to the first layer")
st.dataframe(
    pd.DataFrame(
        shape_trail(
            tokens=len(ids),
            width=found.token.shape[1],
            vocabulary=ui.run_model("anatomy", lm.name).vocabulary,
            position_rows=None if found.position is None else ui.run_model("anatomy", lm.name).position_rows,
            token_types=found.token_type is not None,
            norm=vectors.norm,
            position_scheme=found.position_scheme,
            position_offset=found.position_offset,
            token_projection=found.token_projection,
            projection=found.projection,
            hidden=vectors.first_layer.shape[-1],
            received=vectors.first_layer.shape,
            copied=vectors.summed.shape == vectors.first_layer.shape,
            trigram=found.trigram,
            token_scale=found.token_scale,
        )
    ),
    hide_index=True,
    width="stretch",
)
error = vectors.largest_difference
if found.note:  # the decomposition does not apply: say why, not a difference
    st.caption(ui.literal(found.note))
elif error <= 1e-5:
    st.caption(f"Checked: this sum is what the model's first layer receives (largest difference {error:.1e}).")
else:
    st.caption(
        f"This model does more before its first layer than the sum above (largest difference {error:.3g}): it "
        "scales or offsets its embeddings, for example."
    )
st.subheader("Token embeddings")
with ui.stage():
    ui.show_view(embeddings, vectors, key="tokens")

st.subheader("Positions")
if found.position is not None:
    left, right = st.columns(2)
    with left:
        ui.show_view(views.tokens.LearnedPositions(lm.name, text, pair or None), vectors, key="positions")
    with right:
        ui.show_view(views.tokens.Sinusoidal(lm.name, text, pair or None), vectors, key="sinusoidal")
    st.caption(
        "Left: what this model learned for each position. Right: the original Transformer's fixed encoding, "
        "for comparison: dimensions 2i and 2i + 1 hold the sine and the cosine of the position × 1 / "
        f"10000^(2i / {found.token.shape[1]}), so pair i turns slower as i grows. Where the figure has fewer "
        "pixels than pairs it shows 1 pair in k (the axis says so): drawn narrower than its columns, the stripes "
        "would blur into patterns that are not in the values."
    )
elif found.inverse_frequency is not None:
    ui.show_view(views.tokens.RotaryAngles(lm.name, text, pair or None), vectors, key="rotary")
    st.caption(
        "This model has no position table: it rotates each pair of query and key dimensions by position × "
        "frequency (the model's own frequencies). Fast pairs turn quickly, slow ones barely: the dot product of "
        "a rotated query and key then depends on how far apart the two tokens are."
    )
else:
    st.caption(f"Position scheme: {found.position_scheme} (no position table to show for this model).")

st.subheader("How context changes a token")
first, second, word_column = st.columns([3, 3, 1])
with first:
    sentence_a = ui.text_ui("Sentence 1", "time flies like an arrow", key="ctx_a", height=68)
with second:
    sentence_b = ui.text_ui("Sentence 2", DEFAULT_PAIR, key="ctx_b", height=68)
with word_column:
    word = ui.text_ui("Word", "flies", key="word", height=None)
context = views.tokens.Context(lm.name, sentence_a, sentence_b, word)
try:
    captures = ui.run_view(context)
except explorer.InputError as error:
    st.info(ui.literal(error))
    st.stop()
similarity = context.similarity(captures)
if similarity is None:
    st.info(f"“{ui.literal(word)}” is not a single token of both sentences for this model: pick a word in both.")
    st.stop()
ui.show_view(context, captures, key="context")
st.caption(
    f"Cosine similarity of the vector of “{ui.literal(word)}” in the two sentences: "
    + context.caption(captures)  # from the cosines drawn: rises, falls or stays
    + " "
    + views.lens.LAYERS_COUNTED
)
