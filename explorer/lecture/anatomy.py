"""The transformer anatomy deck: from a text's token ids to attention, heads, layers and parameter counts.

Each slide runs the chapter's inputs on the bundled encoder (all-MiniLM-L6-v2, which shares bert-base-uncased's
vocabulary, so the chapter's token ids come out the same) or the bundled seq2seq model, and prints the sources'
numbers beside the model's own (the sources' figures are listed in ``../shared/notes/seed-artifacts.md``).
"""

from __future__ import annotations

import numpy as np

from explorer import DEFAULT_DECODER, DEFAULT_ENCODER, DEFAULT_SEQ2SEQ, views
from explorer.compute.anatomy import memory_mb, model_lecture_count
from explorer.compute.attention import score_stages
from explorer.compute.sampling import softmax
from explorer.lecture.deck import Deck, Question, Slide

TEXT = "time flies like an arrow"
SECOND_TEXT = "fruit flies like a banana"
CHAPTER_IDS = (2051, 10029, 2066, 2019, 8612)  # bert-base-uncased, no special tokens (artifact 1)
CHAPTER_TOKENS = ("time", "flies", "like", "an", "arrow")
PAIR_IDS = (101, 2051, 10029, 2066, 2019, 8612, 102, 5909, 10029, 2066, 1037, 15212, 102)  # artifact 7
PAIR_TYPES = (0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1)
FLIES = 2  # "flies" among [CLS] time flies like an arrow [SEP]
HEAD = 8  # the chapter's head (layer 0)
DATES = ("Thursday, March 5, 2021", "2021-03-05")  # the bundled seq2seq model's own example
# One word changes the bundled decoder's next pronoun: the Patching page's own default pair.
PATCHING_PAIR = ("The girl was sure that", "The boy was sure that")
# The Why this token? page's default: the name is what tips the bundled decoder to " she".
ATTRIBUTION_TEXT = "Elizabeth knew that"


def _ids(ids) -> str:
    return " ".join(str(int(i)) for i in ids)


# -- tokens and embeddings ------------------------------------------------------------------------------------


def _ordinary_ids(vectors) -> list[int]:
    return [row.token_id for row in vectors.rows if not row.special]


def _tokenization_against(vectors) -> tuple[str, ...]:
    ids = _ordinary_ids(vectors)
    same = "the same" if tuple(ids) == CHAPTER_IDS else "different"
    return (f"Chapter (bert-base-uncased): {_ids(CHAPTER_IDS)} · this model: {_ids(ids)} ({same})",)


def _token_counts(vectors) -> tuple[str, ...]:
    count = len(vectors.rows)
    return tuple(str(n) for n in sorted({max(count - 2, 1), count, count + 2}))


def _lookup_against(vectors) -> tuple[str, ...]:
    count, width = vectors.embeddings.token.shape
    return (
        "Chapter: Embedding(30522, 768) turns the 5 ids into a [1, 5, 768] tensor",
        f"This model: {count} tokens ([CLS] and [SEP] included) → [1, {count}, {width}]",
    )


def _positions_against(vectors) -> tuple[str, ...]:
    count = len(vectors.rows)
    return (
        "Chapter: position ids [0, 1, 2, 3, 4], a learned vector for each, added to the token's",
        f"This model: positions 0 to {count - 1} for its {count} tokens, each a learned row of width "
        f"{vectors.embeddings.token.shape[1]}",
    )


# -- attention ----------------------------------------------------------------------------------------------------


def _toy_weights(found) -> np.ndarray:
    return TOY.stages(found)["weights"]


def _toy_against(found) -> tuple[str, ...]:
    row = _toy_weights(found)[0]
    shown = ", ".join(f"{weight:.4g}" for weight in row)
    return (
        "Chapter (random embeddings): [1.0000e+00, 5.1735e-12, 3.7513e-13, 2.1163e-12, 9.7180e-13]",
        f"This model's embeddings, query “time”: [{shown}]",
    )


def _toy_answer(found) -> str:
    return CHAPTER_TOKENS[int(np.argmax(_toy_weights(found)[0]))]


def _head_stages(capture) -> dict:
    return score_stages(capture.stacks["encoder"], 0, HEAD)


def _scaling_against(capture) -> tuple[str, ...]:
    stages = _head_stages(capture)
    head_dim = capture.stacks["encoder"].queries.shape[-1]
    scaled = float(stages["weights"][FLIES].max())
    unscaled = float(softmax(stages["dot"][FLIES]).max())
    return (
        f"q·k for “flies” spans {np.ptp(stages['dot'][FLIES]):.1f}; × 1/√{head_dim} it spans "
        f"{np.ptp(stages['scaled'][FLIES]):.1f}",
        f"Largest weight with the scale: {scaled:.2f}; without it: {unscaled:.2f}",
    )


def _scaling_answer(capture) -> str:
    stages = _head_stages(capture)
    scaled, unscaled = float(stages["weights"][FLIES].max()), float(softmax(stages["dot"][FLIES]).max())
    return "it grows" if unscaled > scaled + 1e-6 else "it shrinks" if unscaled < scaled - 1e-6 else "it stays"


def _flies_weights(capture) -> np.ndarray:
    return capture.stacks["encoder"].attentions[0, HEAD, FLIES]


def _neuron_against(capture) -> tuple[str, ...]:
    weights = _flies_weights(capture)
    key = int(np.argmax(weights))
    return (
        "Chapter (bert-base-uncased, layer 0, head 8): the query of “flies” meets the key of “arrow” most",
        f"This model, same layer and head: most weight on “{capture.tokens[key]}” ({weights[key]:.2f})",
    )


def _largest_key(capture) -> str:
    return capture.tokens[int(np.argmax(_flies_weights(capture)))]


def _heads_against(capture) -> tuple[str, ...]:
    _, heads, _, head_dim = capture.stacks["encoder"].queries.shape
    return (
        "Chapter (BERT base): 768 / 12 heads = 64 per head; the heads' outputs concatenate back to [1, 5, 768]",
        f"This model: {heads * head_dim} / {heads} heads = {head_dim} per head",
    )


def _pair_types(capture) -> list[int]:
    start = capture.segment_b_start or len(capture.tokens)
    return [0 if position < start else 1 for position in range(len(capture.tokens))]


def _pair_against(capture) -> tuple[str, ...]:
    ids = capture.token_ids.tolist()
    same = "the same" if tuple(ids) == PAIR_IDS and tuple(_pair_types(capture)) == PAIR_TYPES else "different"
    return (
        f"Chapter: {len(PAIR_IDS)} ids {_ids(PAIR_IDS)}, token types {_ids(PAIR_TYPES)}",
        f"This model: {len(ids)} ids {_ids(ids)}, token types {_ids(_pair_types(capture))} ({same})",
    )


def _second_flies_inside(capture) -> str:
    """Whether the second “flies” keeps most of its weight (all layers, head 8) inside its own sentence."""
    start = capture.segment_b_start
    weights = capture.stacks["encoder"].attentions[:, HEAD, start + 1]  # [layer, key]
    inside = float(weights[:, start:].sum() / weights.sum())
    return "inside its own sentence" if inside >= 0.5 else "in the other sentence"


# -- layers and counts -----------------------------------------------------------------------------------------


def _first_layer_recovering(patching) -> str:
    """The first layer whose input, patched at the last position alone, brings back at least half the answer."""
    return _stream_label(patching, int(np.argmax(patching.residual[:, -1] >= 0.5)))


def _stream_label(patching, layer: int) -> str:
    return "out of the last layer" if layer == patching.num_layers else f"into layer {layer}"


def _feed_forward_against(anatomy) -> tuple[str, ...]:
    return (
        "Chapter (BERT base): 768 → 3072 → 768 with GELU (the lecture: ReLU, d_ff = 4d)",
        f"This model: {anatomy.width} → {anatomy.ffn_size} → {anatomy.width} (d_ff = "
        f"{anatomy.ffn_size / anatomy.width:g}d)",
    )


def _count_against(anatomy) -> tuple[str, ...]:
    count = model_lecture_count(anatomy)
    return (
        f"Lecture's formula (|V| + l_c)·d + (12d² + 4d)·L: {count.formula_total:,}; numel(): "
        f"{count.actual_total:,} (biases {count.biases:,} left out)",
        f"Lecture: 61M × 4 bytes = 232.7 MB, × 1 byte = 58.2 MB; this model: {memory_mb(count.actual_total, 32):.1f} "
        f"MB, {memory_mb(count.actual_total, 8):.1f} MB",
    )


def _spec_against(anatomy) -> tuple[str, ...]:
    return (
        "Transformer base: N = 6, d_model 512, d_ff 2048, h 8, d_k 64 · GPT-3 Small: 12 layers, d 768, 12 heads",
        f"This model: {anatomy.layers} layers, d {anatomy.width}, d_ff {anatomy.ffn_size}, {anatomy.heads} heads "
        f"of {anatomy.head_dim}",
    )


def _cross_against(capture) -> tuple[str, ...]:
    cross = capture.stacks["cross"]
    rows, columns = cross.attentions.shape[2:]
    return (
        "Chapter: having written “Die Zeit”, the decoder predicts “fliegt”: target rows × source columns",
        f"This model: {rows} target rows × {columns} source columns",
    )


TOY = views.attention.Toy(DEFAULT_ENCODER, TEXT, CHAPTER_IDS, CHAPTER_TOKENS)

ANATOMY = Deck(
    "anatomy",
    "Transformer anatomy",
    (
        Slide(
            "From text to token ids",
            views.tokens.Embeddings(DEFAULT_ENCODER, TEXT),
            ("Each word is one token here; [CLS] and [SEP] frame the sentence.", "Each token is an id."),
            "The tokenizer splits the text and looks each piece up in a fixed vocabulary. This encoder uses "
            "bert-base-uncased's vocabulary, so the ids are exactly the chapter's.",
            (1,),
            against=_tokenization_against,
            question=Question(
                "How many tokens will the tokenizer make of “time flies like an arrow”, special tokens included?",
                _token_counts,
                lambda vectors: str(len(vectors.rows)),
                "Five words, each in the vocabulary, plus [CLS] at the start and [SEP] at the end.",
            ),
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "Each id looks up a vector",
            views.tokens.Embeddings(DEFAULT_ENCODER, TEXT),
            ("One row per token: its learned embedding.", "Nothing here knows the word's neighbours yet."),
            "An embedding layer is a table with one row per vocabulary entry; the id picks the row. Same word, "
            "same row, wherever it stands.",
            (3,),
            against=_lookup_against,
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "Where each token stands",
            views.tokens.LearnedPositions(DEFAULT_ENCODER, TEXT),
            ("One learned vector per position, added to the token's.",),
            "Attention by itself ignores order: shuffle the tokens and each output shuffles the same way. A "
            "position vector added to each token's embedding tells the layers where it stands.",
            (11,),
            against=_positions_against,
        ),
        Slide(
            "Positions by a formula",
            views.tokens.Sinusoidal(DEFAULT_ENCODER, TEXT),
            ("PE(pos, 2i) = sin(pos / 10000^(2i/d)), cosines in between.", "Fast waves left, slow waves right."),
            "The original Transformer used fixed sines and cosines instead of a learned table; rotary and "
            "relative schemes, used by most recent models, rotate or bias the scores instead.",
            (11,),
        ),
        Slide(
            "Attention with nothing learned",
            TOY,
            ("Here the queries, keys and values are the embeddings themselves.", "Scores, scale, softmax, sum."),
            "The chapter's first attention has no weights at all: each token's embedding is its query, key and "
            "value. Each row of weights sums to 1, and the output is a weighted average of the values.",
            (5,),
            against=_toy_against,
            question=Question(
                "With queries = keys = the embeddings, which token will “time” attend to most?",
                lambda found: CHAPTER_TOKENS,
                _toy_answer,
                "A vector's dot product with itself is its squared length, larger than with any other direction.",
                shares=lambda found: _toy_weights(found)[0],
            ),
        ),
        Slide(
            "Why divide by √d_k",
            views.attention.StepByStep(DEFAULT_ENCODER, TEXT, layer=0, head=HEAD, query=FLIES),
            ("q·k grows with the vectors' width.", "The scale keeps the softmax from saturating."),
            "Dot products of d_k random components have a variance of d_k: without the scale, wide heads give "
            "large scores, softmax puts nearly all weight on one key, and its gradients vanish.",
            ("scaling by √d_k",),
            against=_scaling_against,
            question=Question(
                "Skip the 1/√d_k scale: what happens to the largest weight of “flies”?",
                lambda capture: ("it grows", "it shrinks", "it stays"),
                _scaling_answer,
                "Larger scores make the softmax peakier: the largest one takes more of the weight.",
            ),
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "A query meets the keys",
            views.attention.Neuron(DEFAULT_ENCODER, TEXT, layer=0, head=HEAD, query=FLIES),
            ("The query of “flies” against each key, element by element.", "The sum is the score."),
            "The neuron view shows where a score comes from: the elementwise product of one query with each key. "
            "Large products with the same sign make a large score.",
            (4,),
            against=_neuron_against,
            question=Question(
                "In layer 0, head 8, which token will “flies” attend to most?",
                lambda capture: capture.tokens,
                _largest_key,
                "The key whose elementwise products with the query of “flies” add up to the largest score wins.",
                shares=_flies_weights,
            ),
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "Many heads from one width",
            views.attention.AllHeads(DEFAULT_ENCODER, TEXT),
            ("Every head of every layer, side by side.", "Each head splits the width: d / h dimensions."),
            "Multi-head attention runs h smaller attentions in parallel, each on d / h dimensions, and "
            "concatenates their outputs before one output projection: Concat(head_1, ..., head_h) W^O.",
            (6,),
            against=_heads_against,
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "Two meanings of “flies”",
            views.attention.BertViz(DEFAULT_ENCODER, TEXT, SECOND_TEXT, which="head", head=HEAD),
            ("Two sentences in one input, token types 0 and 1.", "Hover a token to see where it looks."),
            "The head view draws each layer's attention as lines. Most weight stays inside each sentence; the "
            "chapter reads “flies” attending to “arrow” in one and to “fruit” and “banana” in the other.",
            (7,),
            against=_pair_against,
            question=Question(
                "Over all layers of head 8, where will the second “flies” put most of its weight?",
                lambda capture: ("inside its own sentence", "in the other sentence"),
                _second_flies_inside,
                "Each sentence is its own context: its tokens mostly read each other (and [SEP]).",
            ),
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "The causal mask",
            views.attention.Toy(DEFAULT_ENCODER, TEXT, CHAPTER_IDS, CHAPTER_TOKENS, causal=True, show="mask"),
            ("1 where a token may look, 0 where it may not.", "A decoder sees only the past."),
            "A decoder must not read the tokens it is about to predict, so each token attends only to itself and "
            "those before it: torch.tril(torch.ones(5, 5)).",
            (13,),
        ),
        Slide(
            "Masked scores",
            views.attention.Toy(DEFAULT_ENCODER, TEXT, CHAPTER_IDS, CHAPTER_TOKENS, causal=True, show="scores"),
            ("−∞ above the diagonal.", "Softmax turns −∞ into a weight of exactly 0."),
            "The mask is applied to the scores before the softmax: −∞ there, so e^−∞ = 0 and each row's weight "
            "is shared among the allowed keys only.",
            (13,),
        ),
        Slide(
            "The feed-forward layer",
            views.anatomy.Parameters(DEFAULT_ENCODER),
            ("Each layer: attention, then a feed-forward network per token.", "Width d → d_ff → d."),
            "After attention mixes the tokens, a two-layer network transforms each token on its own. Around both "
            "sit residual connections and layer norms (BERT normalises after, most newer models before).",
            (8,),
            against=_feed_forward_against,
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "Counting parameters",
            views.anatomy.Parameters(DEFAULT_ENCODER),
            ("Embeddings, then the same layer L times.", "The lecture's formula leaves the biases out."),
            "Count with sum(p.numel() for p in model.parameters()). Memory is parameters × bytes each: 4 in "
            "float32, 1 in 8-bit.",
            (15,),
            against=_count_against,
        ),
        Slide(
            "Sizes side by side",
            views.anatomy.Parameters(DEFAULT_ENCODER),
            ("Layers, width, feed-forward width, heads.", "The same recipe from 4 million to 175 billion."),
            "The spec tables all use the same few numbers: N layers, d_model, d_ff, h heads of d_k each. Scaling "
            "a model up turns these dials.",
            (16,),
            against=_spec_against,
        ),
        Slide(
            "Encoder and decoder: cross-attention",
            views.attention.Head(DEFAULT_SEQ2SEQ, DATES[0], target=DATES[1], stack="cross"),
            ("Rows: the output written so far. Columns: the input.", "Not square: target × source."),
            "In an encoder-decoder, each decoder row is the token that predicts the next one; cross-attention "
            "lets it read the whole encoded input.",
            (14,),
            against=_cross_against,
        ),
        Slide(
            "Which words made it say that?",
            views.attribution.Scores(DEFAULT_DECODER, ATTRIBUTION_TEXT, method="occlusion"),
            ("Each bar: the drop in log p(next token) with that word blanked out.", "Taller = leaned on more."),
            "Occlusion blanks one input token at a time (its embedding set to zero) and reads how far the "
            "prediction's log-probability falls. The last token always matters most; the question is which earlier "
            "word the prediction leans on. Integrated gradients on the page gives scores that add up exactly.",
            ("input attribution",),
            question=Question(
                "Before the last word, which word does the prediction lean on most?",
                lambda attribution: tuple(attribution.tokens[:-1]),
                lambda attribution: attribution.tokens[views.attribution.strongest(attribution)],
                "The name decides which pronoun comes next; the verb says little about it.",
            ),
        ),
        Slide(
            "Where is the answer computed?",
            views.patching.Residual(DEFAULT_DECODER, *PATCHING_PAIR),
            ("Clean run's stream copied into the corrupted run, one cell at a time.", "1 = the clean answer is back."),
            "Activation patching: run the corrupted prompt, but copy one piece of the clean run's residual stream "
            "into it. Where that brings the clean answer back, that piece carries the information. The changed "
            "word's own position carries it early; the last position picks it up a few layers in.",
            ("activation patching",),
            question=Question(
                "Patching only the last token: from which layer on does the clean answer mostly come back?",
                lambda patching: tuple(_stream_label(patching, layer) for layer in range(patching.num_layers + 1)),
                _first_layer_recovering,
                "Attention in the layers before moves the changed word's information to the last position.",
            ),
        ),
    ),
)
