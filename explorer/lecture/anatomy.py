"""The transformer anatomy deck: from a text's token ids to attention, heads, layers and parameter counts.

Each slide runs the chapter's inputs on the bundled encoder (all-MiniLM-L6-v2, which shares bert-base-uncased's
vocabulary, so the chapter's token ids come out the same) or the bundled seq2seq model, and prints the sources'
numbers beside the model's own (the sources' figures are listed in ``../shared/notes/seed-artifacts.md``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from explorer import DEFAULT_DECODER, DEFAULT_ENCODER, DEFAULT_SEQ2SEQ, views
from explorer.compute.anatomy import formula_gap, memory_text, model_lecture_count
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
PAIR_LAYER = 0  # the head view's layer: the chapter names head 8 and no layer; the neuron view's is 0
PAIR_WORD = "flies"  # the word read in the second sentence
SPECIAL = ("[CLS]", "[SEP]")
DATES = ("Thursday, March 5, 2021", "2021-03-05")  # the bundled seq2seq model's own example
# One word changes the bundled decoder's next pronoun: the Patching page's own default pair.
PATCHING_PAIR = ("The girl was sure that", "The boy was sure that")
# The Why this token? page's default: the name is what tips the bundled decoder to " she".
ATTRIBUTION_TEXT = "Elizabeth knew that"
# The sources' spec tables (artifact 16): (name, layers, d_model, d_ff, heads).
SPEC_MODELS = (("Transformer base", 6, 512, 2048, 8), ("GPT-3 Small", 12, 768, 3072, 12))


def _ids(ids) -> str:
    return " ".join(str(int(i)) for i in ids)


def _quoted(token: str) -> str:
    return f"“{token}”"


def _share(value: float) -> str:
    return f"{100 * value:.0f}%"


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


def word_count(rows) -> int:
    """Words of the text: ordinary tokens that start one (a leading space mark, or a gap before them)."""
    ordinary = [row for row in rows if not row.special]
    starts = [
        i == 0 or row.token.startswith("␣") or (row.start or 0) > (ordinary[i - 1].end or 0)
        for i, row in enumerate(ordinary)
    ]
    return sum(starts)


def _specials(rows) -> str:
    names = [row.token for row in rows if row.special]
    return f"{len(names)} special tokens ({', '.join(names)})" if names else "no special tokens"


def _tokenization_why(vectors) -> str:
    rows = vectors.rows
    ordinary, words = sum(1 for row in rows if not row.special), word_count(rows)
    split = "one token per word" if ordinary == words else f"{ordinary} tokens for {words} words: some split"
    return f"{split}, plus {_specials(rows)}: {len(rows)} in all."


def _lookup_against(vectors) -> tuple[str, ...]:
    count, width = vectors.embeddings.token.shape
    return (
        "Chapter: Embedding(30522, 768) turns the 5 ids into a [1, 5, 768] tensor",
        f"This model: {count} tokens ({_specials(vectors.rows)} included) → [1, {count}, {width}]",
    )


def _positions_against(vectors) -> tuple[str, ...]:
    count = len(vectors.rows)
    return (
        "Chapter: position ids [0, 1, 2, 3, 4], a learned vector for each, added to the token's",
        f"This model: positions 0 to {count - 1} for its {count} tokens, each a learned row of width "
        f"{vectors.embeddings.token.shape[1]}",
    )


# -- attention ----------------------------------------------------------------------------------------------------


def _toy_weights(found, view=None) -> np.ndarray:
    view = view or TOY
    return view.stages(found)["weights"][view.query]


def _toy_row(weights) -> str:
    return ", ".join(f"{weight:.4g}" for weight in weights)


def _toy_against(found, view=None) -> tuple[str, ...]:
    view = view or TOY
    return (
        "Chapter (random embeddings): [1.0000e+00, 5.1735e-12, 3.7513e-13, 2.1163e-12, 9.7180e-13]",
        f"This slide ({view.setting()}), query {_quoted(view.tokens[view.query])}: "
        f"[{_toy_row(_toy_weights(found, view))}]",
    )


def _toy_answer(found, view=None) -> str:
    view = view or TOY
    return view.tokens[int(np.argmax(_toy_weights(found, view)))]


def _toy_why(found, view=None) -> str:
    """Which key scores highest with the query, itself or another, with the numbers that decide it."""
    view = view or TOY
    stages, query = view.stages(found), view.query
    dots, weights = stages["dot"][query], stages["weights"][query]
    top = int(np.argmax(weights))
    others = np.delete(dots, query)
    itself = f"{_quoted(view.tokens[query])}·{_quoted(view.tokens[query])} = {dots[query]:.1f} (its squared length)"
    if top == query:
        said = f"{itself}, against at most {others.max():.1f} with another token"
    else:
        said = f"{_quoted(view.tokens[top])} scores {dots[top]:.1f} with it, more than {itself}"
    width = view.vectors(found).shape[-1]
    return f"{said}; × 1/√{width} and softmax give {_quoted(view.tokens[top])} {weights[top]:.4f} of the weight."


def _head_stages(capture, view=None) -> dict:
    view = view or STEPS
    return score_stages(capture.stacks[view.stack], view.layer, view.head)


def _scaled_and_unscaled(capture, view=None) -> tuple[float, float]:
    view = view or STEPS
    stages = _head_stages(capture, view)
    return float(stages["weights"][view.query].max()), float(softmax(stages["dot"][view.query]).max())


def _scaling_against(capture, view=None) -> tuple[str, ...]:
    view = view or STEPS
    stages, query = _head_stages(capture, view), view.query
    head_dim = capture.stacks[view.stack].head_dim(view.layer)
    token = _quoted(capture.stacks[view.stack].query_tokens[query])
    scaled, unscaled = _scaled_and_unscaled(capture, view)
    return (
        f"q·k for {token} spans {np.ptp(stages['dot'][query]):.1f}; × 1/√{head_dim} it spans "
        f"{np.ptp(stages['scaled'][query]):.1f}",
        f"Largest weight with the scale: {scaled:.2f}; without it: {unscaled:.2f}",
    )


def _scaling_answer(capture, view=None) -> str:
    scaled, unscaled = _scaled_and_unscaled(capture, view)
    return "it grows" if unscaled > scaled + 1e-6 else "it shrinks" if unscaled < scaled - 1e-6 else "it stays"


def _scaling_why(capture, view=None) -> str:
    view = view or STEPS
    stages, query = _head_stages(capture, view), view.query
    scaled, unscaled = _scaled_and_unscaled(capture, view)
    return (
        f"Without the scale the scores spread over {np.ptp(stages['dot'][query]):.1f} instead of "
        f"{np.ptp(stages['scaled'][query]):.1f}, and the softmax gives the largest {unscaled:.2f} instead of "
        f"{scaled:.2f}."
    )


def _scaling_after(capture, view=None) -> tuple[str, ...]:
    """What the scale does here: it keeps the softmax from saturating where the unscaled weight nearly is one."""
    scaled, unscaled = _scaled_and_unscaled(capture, view)
    if unscaled >= SATURATED > scaled:
        return (
            f"Unscaled, one key would take {unscaled:.2f} of the weight: the scale keeps the softmax from saturating.",
        )
    return (f"The scale changes the largest weight from {unscaled:.2f} to {scaled:.2f}.",)


SATURATED = 0.9  # a softmax whose largest weight is this or more puts nearly everything on one key


def _flies_weights(capture, view=None) -> np.ndarray:
    view = view or NEURON
    return capture.stacks[view.stack].attentions[view.layer, view.head, view.query]


def _neuron_against(capture, view=None) -> tuple[str, ...]:
    view = view or NEURON
    weights = _flies_weights(capture, view)
    key = int(np.argmax(weights))
    return (
        "Chapter (bert-base-uncased, layer 0, head 8): the query of “flies” meets the key of “arrow” most",
        f"This model, layer {view.layer}, head {view.head}: most weight on {_quoted(capture.tokens[key])} "
        f"({weights[key]:.2f})",
    )


def _largest_key(capture, view=None) -> str:
    return capture.tokens[int(np.argmax(_flies_weights(capture, view)))]


def _neuron_why(capture, view=None) -> str:
    view = view or NEURON
    scores = _head_stages(capture, view)["scaled"][view.query]
    weights = _flies_weights(capture, view)
    first, second = np.argsort(-scores)[:2]
    query = _quoted(capture.tokens[view.query])
    return (
        f"The key of {_quoted(capture.tokens[first])} gives the largest score with the query of {query}, "
        f"{scores[first]:.2f} (next: {_quoted(capture.tokens[second])}, {scores[second]:.2f}): the softmax gives it "
        f"the most weight, {weights[first]:.2f}."
    )


def _heads_against(capture) -> tuple[str, ...]:
    _, heads, _, head_dim = capture.main.queries.shape
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


# Where the second sentence's word puts its weight: (choice, which keys), in the order of ``pair_shares``.
PAIR_CHOICES = ("on its own sentence's words", "on [CLS] and [SEP]", "on the other sentence's words")


def second_word(capture) -> int:
    """The position of ``PAIR_WORD`` in the second sentence."""
    return capture.tokens.index(PAIR_WORD, capture.segment_b_start)


def pair_shares(capture) -> tuple[float, float, float]:
    """The second sentence's ``PAIR_WORD``, layer ``PAIR_LAYER``, head ``HEAD``: its weight on its own sentence's
    words, on the special tokens, and on the other sentence's words (adding up to 1)."""
    weights = capture.stacks["encoder"].attentions[PAIR_LAYER, HEAD, second_word(capture)]
    special = np.array([token in SPECIAL for token in capture.tokens])
    own = np.array(_pair_types(capture)) == 1
    return (
        float(weights[own & ~special].sum()),
        float(weights[special].sum()),
        float(weights[~own & ~special].sum()),
    )


def _pair_answer(capture) -> str:
    return PAIR_CHOICES[int(np.argmax(pair_shares(capture)))]


def _pair_why(capture) -> str:
    own, special, other = (_share(share) for share in pair_shares(capture))
    return (
        f"In layer {PAIR_LAYER}, head {HEAD}, the second {_quoted(PAIR_WORD)} puts {own} on its own sentence's "
        f"words, {special} on [CLS] and [SEP], {other} on the other sentence's words."
    )


def _pair_after(capture) -> tuple[str, ...]:
    """Which word each “flies” reads most (special tokens aside), beside the chapter's reading."""
    attentions = capture.stacks["encoder"].attentions[PAIR_LAYER, HEAD]
    ordinary = [i for i, token in enumerate(capture.tokens) if token not in SPECIAL]
    first = capture.tokens.index(PAIR_WORD)
    read = []
    for which, query in (("first", first), ("second", second_word(capture))):
        key = max((k for k in ordinary if k != query), key=lambda k: attentions[query, k])
        read.append(
            f"the {which} {_quoted(PAIR_WORD)} reads {_quoted(capture.tokens[key])} (#{key}) most "
            f"({attentions[query, key]:.2f})"
        )
    return (
        "The chapter reads “flies” attending to “arrow” in one sentence and to “fruit” and “banana” in the other.",
        f"Here, special tokens and itself aside: {'; '.join(read)}.",
    )


# -- layers and counts -----------------------------------------------------------------------------------------


NOWHERE = "from no layer"  # the patched last position never brings back half the clean answer


def _recovering_choices(patching) -> tuple[str, ...]:
    return (*(_stream_label(patching, layer) for layer in range(patching.num_layers + 1)), NOWHERE)


def _first_layer_recovering(patching) -> str:
    """The first layer whose input, patched at the last position alone, brings back at least half the answer."""
    back = patching.residual[:, -1] >= 0.5
    return _stream_label(patching, int(np.argmax(back))) if back.any() else NOWHERE


def _stream_label(patching, layer: int) -> str:
    return "out of the last layer" if layer == patching.num_layers else f"into layer {layer}"


def _changed_position(patching) -> int:
    return next(
        i for i, (a, b) in enumerate(zip(patching.clean_tokens, patching.corrupted_tokens, strict=True)) if a != b
    )


def _recovering_why(patching) -> str:
    last = patching.residual[:, -1]
    answer = _first_layer_recovering(patching)
    if answer == NOWHERE:
        return (
            f"Patched at the last position alone, the clean answer comes back by at most {_share(float(last.max()))}."
        )
    layer = int(np.argmax(last >= 0.5))
    before = f", {_share(float(last[layer - 1]))} {_stream_label(patching, layer - 1)}" if layer else ""
    return f"Patched at the last position alone, {_share(float(last[layer]))} of it is back {answer}{before}."


def _recovering_after(patching) -> tuple[str, ...]:
    """Where the changed word's own position carries the answer: the layers from which patching it alone brings
    back half or more."""
    changed = _changed_position(patching)
    carries = [layer for layer in range(patching.num_layers + 1) if patching.residual[layer, changed] >= 0.5]
    word = _quoted(patching.clean_tokens[changed])
    if not carries:
        return (f"Patched at {word} alone, no layer brings back half the clean answer.",)
    return (f"Patched at {word} alone, half or more is back in {_streams(patching, carries[0], carries[-1])}.",)


def _streams(patching, first: int, last: int) -> str:
    """The residual streams from layer ``first``'s input to layer ``last``'s (L: the last layer's output)."""
    name = lambda layer: "the last layer's output" if layer == patching.num_layers else f"layer {layer}'s input"  # noqa: E731
    return f"the stream at {name(first)}" if first == last else f"the streams from {name(first)} to {name(last)}"


def _attribution_why(attribution) -> str:
    scores = attribution.scores[:-1]
    first, second = (int(i) for i in np.argsort(-scores)[:2]) if len(scores) > 1 else (0, 0)
    target = _quoted(attribution.target_token.replace("␣", " ").strip() or attribution.target_token)
    said = f"Blanking {_quoted(attribution.tokens[first])} lowers log p({target}) by {scores[first]:.2f}"
    if second != first:
        runner_up = f"{_quoted(attribution.tokens[second])}, {scores[second]:.2f}"
        said += f", more than any other word before the last (next: {runner_up})"
    return said + "."


def _attribution_after(attribution) -> tuple[str, ...]:
    """Whether the last token matters most of all, as it often does, from the scores shown."""
    scores, last = attribution.scores, len(attribution.scores) - 1
    token = _quoted(attribution.tokens[last])
    if int(np.argmax(scores)) == last:
        return (f"The last token, {token}, matters most of all ({scores[last]:.2f}).",)
    top = _quoted(attribution.tokens[int(np.argmax(scores))])
    return (f"The last token, {token}, scores {scores[last]:.2f}: less than {top}.",)


def _feed_forward_against(anatomy) -> tuple[str, ...]:
    return (
        "Chapter (BERT base): 768 → 3072 → 768 with GELU (the lecture: ReLU, d_ff = 4d)",
        f"This model: {anatomy.width} → {anatomy.ffn_size} → {anatomy.width} (d_ff = "
        f"{anatomy.ffn_size / anatomy.width:g}d)",
    )


def _count_against(anatomy) -> tuple[str, ...]:
    count = model_lecture_count(anatomy)
    gap = "; ".join(f"{term.reason} {term.parameters:+,}" for term in formula_gap(anatomy, count))
    return (
        f"Lecture's formula (|V| + l_c)·d + (12d² + 4d)·L: {count.formula_total:,}; numel(): {count.actual_total:,}; "
        f"the {count.actual_total - count.formula_total:,} between them: {gap}",
        "Lecture: 61M × 4 bytes = 244 MB (232.7 MiB, written “232.7 MB”), × 1 byte = 61 MB (58.2 MiB); this model: "
        f"{memory_text(count.actual_total, 32)} at 4 bytes, {memory_text(count.actual_total, 8)} at 1 byte "
        "(MB = 10⁶ bytes, MiB = 2²⁰)",
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


# The chapter's own setting: random embeddings (seeded), so that each token's score with itself dominates.
TOY = views.attention.Toy(DEFAULT_ENCODER, TEXT, CHAPTER_IDS, CHAPTER_TOKENS, embeddings="random", specials=False)
STEPS = views.attention.StepByStep(DEFAULT_ENCODER, TEXT, layer=0, head=HEAD, query=FLIES)
NEURON = views.attention.Neuron(DEFAULT_ENCODER, TEXT, layer=0, head=HEAD, query=FLIES)

ANATOMY = Deck(
    "anatomy",
    "Transformer anatomy",
    (
        Slide(
            "From text to token ids",
            views.anatomy.TokenIds(DEFAULT_ENCODER, TEXT),
            ("Each row: a token the tokenizer made, and its id in the vocabulary.",),
            "The tokenizer splits the text and looks each piece up in a fixed vocabulary; the line below sets "
            "this model's ids beside the chapter's.",
            (1,),
            against=_tokenization_against,
            question=Question(
                "How many tokens will the tokenizer make of “time flies like an arrow”, special tokens included?",
                _token_counts,
                lambda vectors: str(len(vectors.rows)),
                _tokenization_why,
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
            (
                "The chapter's setting: seeded random embeddings serve as queries, keys and values.",
                "Scores, scale, softmax, sum.",
            ),
            "The chapter's first attention has no weights at all: each token's vector is its query, key and value. "
            "Each row of weights sums to 1, and the output is a weighted average of the values. The chapter uses "
            "random vectors; the step-by-step page also runs the model's own embeddings.",
            (5,),
            against=_toy_against,
            question=Question(
                "With queries = keys = the embeddings, which token will “time” attend to most?",
                lambda found: CHAPTER_TOKENS,
                _toy_answer,
                _toy_why,
                shares=_toy_weights,
            ),
        ),
        Slide(
            "Why divide by √d_k",
            STEPS,
            ("One query's row, stage by stage: q·k, × 1/√d_k, softmax.", "Read the spread of each stage."),
            "Dot products of d_k random components have a variance of d_k: without the scale, wide heads give "
            "large scores, the softmax can put nearly all weight on one key, and its gradients vanish.",
            ("scaling by √d_k",),
            against=_scaling_against,
            question=Question(
                "Skip the 1/√d_k scale: what happens to the largest weight of “flies”?",
                lambda capture: ("it grows", "it shrinks", "it stays"),
                _scaling_answer,
                _scaling_why,
            ),
            after_reveal=_scaling_after,
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "A query meets the keys",
            NEURON,
            ("One query against each key, element by element.", "The sum is the score."),
            "The neuron view shows where a score comes from: the elementwise product of one query with each key. "
            "Large products with the same sign make a large score.",
            (4,),
            against=_neuron_against,
            question=Question(
                "In layer 0, head 8, which token will “flies” attend to most?",
                lambda capture: capture.tokens,
                _largest_key,
                _neuron_why,
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
            views.attention.BertViz(DEFAULT_ENCODER, TEXT, SECOND_TEXT, which="head", layers=(PAIR_LAYER,), head=HEAD),
            ("Two sentences in one input, token types 0 and 1.", "Hover a token to see where it looks."),
            "The head view draws one layer's attention as lines. The chapter names head 8 and no layer; this slide "
            "shows layer 0, the neuron view's. The lines below split the second “flies”'s weight three ways.",
            (7,),
            against=_pair_against,
            question=Question(
                "In layer 0, head 8, where will the second “flies” put most of its weight?",
                lambda capture: PAIR_CHOICES,
                _pair_answer,
                _pair_why,
                shares=pair_shares,
            ),
            after_reveal=_pair_after,
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "The causal mask",
            dataclasses.replace(TOY, causal=True, show="mask"),
            ("1 where a token may look, 0 where it may not.", "A decoder sees only the past."),
            "A decoder must not read the tokens it is about to predict, so each token attends only to itself and "
            "those before it: torch.tril(torch.ones(5, 5)).",
            (13,),
        ),
        Slide(
            "Masked scores",
            dataclasses.replace(TOY, causal=True, show="scores"),
            ("−∞ above the diagonal.", "Softmax turns −∞ into a weight of exactly 0."),
            "The mask is applied to the scores before the softmax: −∞ there, so e^−∞ = 0 and each row's weight "
            "is shared among the allowed keys only.",
            (13,),
        ),
        Slide(
            "The feed-forward layer",
            views.anatomy.FeedForward(DEFAULT_ENCODER),
            ("Each layer: attention, then a feed-forward network per token.", "Width d → d_ff → d."),
            "After attention mixes the tokens, a two-layer network transforms each token on its own. Around both "
            "sit residual connections and layer norms (BERT normalises after, most newer models before).",
            (8,),
            against=_feed_forward_against,
            chapter_model="bert-base-uncased",
        ),
        Slide(
            "Counting parameters",
            views.anatomy.LectureCount(DEFAULT_ENCODER),
            ("The formula's terms, then each part it leaves out, up to numel().", "Memory: parameters × bytes."),
            "Count with sum(p.numel() for p in model.parameters()). Memory is parameters × bytes each: 4 in "
            "float32, 1 in 8-bit. The lecture's “MB” are MiB (2²⁰ bytes); MB here are 10⁶ bytes.",
            (15,),
            against=_count_against,
        ),
        Slide(
            "Sizes side by side",
            views.anatomy.Sizes(DEFAULT_ENCODER, others=SPEC_MODELS),
            ("Layers, width, feed-forward width, heads: the same four dials.", "Each model turns them its own way."),
            "The spec tables all use the same few numbers: N layers, d_model, d_ff, h heads of d_k each. Scaling "
            "a model up turns these dials, from the original Transformer to GPT-3's 96 layers of width 12,288.",
            (16,),
            against=_spec_against,
        ),
        Slide(
            "Encoder and decoder: cross-attention",
            views.attention.Head(DEFAULT_SEQ2SEQ, DATES[0], target=DATES[1], stack="cross"),
            ("Rows: the output written so far. Columns: the input.", "Its shape: target × source."),
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
            "prediction's log-probability falls; the question is which word before the last the prediction leans "
            "on. Integrated gradients on the page gives scores that add up exactly.",
            ("input attribution",),
            question=Question(
                "Before the last word, which word does the prediction lean on most?",
                lambda attribution: tuple(attribution.tokens[:-1]),
                lambda attribution: attribution.tokens[views.attribution.strongest(attribution)],
                _attribution_why,
            ),
            after_reveal=_attribution_after,
        ),
        Slide(
            "Where is the answer computed?",
            views.patching.Residual(DEFAULT_DECODER, *PATCHING_PAIR),
            ("Clean run's stream copied into the corrupted run, one cell at a time.", "1 = the clean answer is back."),
            "Activation patching: run the corrupted prompt, but copy one piece of the clean run's residual stream "
            "into it. Where that brings the clean answer back, that piece carries the information; the lines "
            "below say where, at the changed word and at the last position.",
            ("activation patching",),
            question=Question(
                "Patching only the last token: from which layer on does the clean answer mostly come back?",
                _recovering_choices,
                _first_layer_recovering,
                _recovering_why,
            ),
            after_reveal=_recovering_after,
        ),
    ),
)
