"""The anatomy deck's claims hold for the data (issue 38): each slide's view runs on its default inputs and on at
least two others (other sentences; the other bundled models where the slide allows), and every answer, ``why``,
line shown after the answer and line beside the source's numbers is checked against what the data says,
recomputed here from the model's own arrays (its eager attention weights, its parameters, its tokenizer).
Also: no line shown before an answer gives it away, and no two consecutive slides draw the same figure."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re

import numpy as np
import plotly.io as pio
import pytest

import explorer
from explorer import DEFAULT_DECODER, DEFAULT_ENCODER, DEFAULT_SEQ2SEQ
from explorer.compute.anatomy import formula_gap, model_lecture_count
from explorer.lecture import ANATOMY
from explorer.lecture import anatomy as deck
from explorer.render.style import SLIDE

MODELS = (DEFAULT_ENCODER, DEFAULT_DECODER, DEFAULT_SEQ2SEQ)
TEXTS = (deck.TEXT, "fruit flies like a banana", "the quick brown fox jumps")


def number_of(title: str) -> int:
    return next(i for i, slide in enumerate(ANATOMY.slides, 1) if slide.title == title)


def slide(title: str):
    return ANATOMY.slide(number_of(title))


def variants(view, field: str, values) -> list:
    return [view, *(dataclasses.replace(view, **{field: value}) for value in values if value != getattr(view, field))]


def softmax(row: np.ndarray) -> np.ndarray:
    shifted = np.exp(row - row.max())
    return shifted / shifted.sum()


# -- tokens -----------------------------------------------------------------------------------------------------


TOKEN_VIEWS = [
    *variants(slide("From text to token ids").view, "text", (*TEXTS, "unbelievably tokenized words")),
    dataclasses.replace(slide("From text to token ids").view, model=DEFAULT_DECODER),
]


@pytest.mark.parametrize("view", TOKEN_VIEWS, ids=lambda view: f"{view.model.rsplit('/', 1)[-1]}-{view.text}")
def test_the_token_count_and_its_reason_are_the_tokenizers(view):
    vectors = view.result()
    ids = explorer.load_model(view.model).tokenizer(view.text)["input_ids"]
    question = slide("From text to token ids").question
    assert question.answer(vectors) == str(len(ids)) and question.answer(vectors) in question.choices(vectors)
    why = question.explanation(vectors)
    assert why.endswith(f"{len(ids)} in all.")
    special = [row.token for row in vectors.rows if row.special]
    assert ("no special tokens" in why) == (not special) and all(token in why for token in special)
    assert ("one token per word" in why) == (len(ids) - len(special) == len(view.text.split()))
    same = tuple(i for i, row in zip(ids, vectors.rows, strict=True) if not row.special) == deck.CHAPTER_IDS
    assert ("(the same)" in slide("From text to token ids").compared(vectors)[0]) == same
    lookup = slide("Each id looks up a vector").compared(vectors)[1]
    width = explorer.load_model(view.model).model.get_input_embeddings().weight.shape[1]
    assert f"[1, {len(ids)}, {width}]" in lookup
    assert (f"{len(special)} special tokens" if special else "no special tokens") in lookup


def test_the_sinusoids_are_fast_on_the_left_and_slow_on_the_right():
    """ "Fast waves left, slow waves right": the first dimensions change sign more often than the last."""
    from explorer.compute.positions import sinusoidal_encoding

    encoding = sinusoidal_encoding(64, 384)
    crossings = (np.diff(np.sign(encoding), axis=0) != 0).sum(axis=0)
    assert crossings[0] > crossings[len(crossings) // 2] > crossings[-1]


# -- the chapter's toy --------------------------------------------------------------------------------------------


def _toy(text: str, **changes):
    tokenizer = explorer.load_model(DEFAULT_ENCODER).tokenizer
    ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
    tokens = tuple(tokenizer.convert_ids_to_tokens(list(ids)))
    return dataclasses.replace(deck.TOY, text=text, token_ids=ids, tokens=tokens, **changes)


TOYS = [deck.TOY, _toy("fruit flies like a banana"), _toy(deck.TEXT, embeddings="model"), _toy(TEXTS[2], seed=3)]


@pytest.mark.parametrize("view", TOYS, ids=lambda view: f"{view.embeddings}-{view.seed}-{view.text}")
def test_the_toys_answer_and_reason_are_its_weights(view):
    found = view.result()
    x = view.vectors(found).astype(np.float64)
    weights = softmax(x[view.query] @ x.T / np.sqrt(x.shape[1]))
    top = int(np.argmax(weights))
    assert deck._toy_answer(found, view) == view.tokens[top]
    why = deck._toy_why(found, view)
    assert f"{x[view.query] @ x[view.query]:.1f} (its squared length)" in why
    assert f"give “{view.tokens[top]}” {weights[top]:.4f} of the weight" in why
    assert ("against at most" in why) == (top == view.query)
    np.testing.assert_allclose(deck._toy_weights(found, view), weights, atol=1e-9)
    if view.embeddings == "random":  # the chapter's setting: each token attends almost only to itself
        assert top == view.query and weights[top] > 0.99
    assert view.setting() in deck._toy_against(found, view)[1] and view.setting() in view.info().where


@pytest.mark.parametrize("text", TEXTS)
def test_the_causal_slides_mask_above_the_diagonal_and_weigh_it_zero(text):
    view = _toy(text, causal=True, show="scores")
    stages = view.stages(view.result())
    above = np.triu(np.ones(stages["masked"].shape, dtype=bool), 1)
    assert np.isneginf(stages["masked"][above]).all() and np.isfinite(stages["masked"][~above]).all()
    assert (stages["weights"][above] == 0).all()


# -- one head of the model ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", TEXTS)
def test_the_scaling_answer_and_reason_are_the_heads_weights(text):
    view = dataclasses.replace(deck.STEPS, text=text)
    capture = view.result()
    stack = capture.stacks["encoder"]
    q, k = (vectors[view.layer, view.head].astype(np.float64) for vectors in (stack.queries, stack.keys))
    dots = q[view.query] @ k.T
    scaled = softmax(dots / np.sqrt(q.shape[1])).max()
    np.testing.assert_allclose(scaled, stack.attentions[view.layer, view.head, view.query].max(), atol=1e-5)
    unscaled = softmax(dots).max()
    question = slide("Why divide by √d_k").question
    assert question.answer(capture) == ("it grows" if unscaled > scaled else "it shrinks")
    assert f"the largest {unscaled:.2f} instead of {scaled:.2f}" in question.explanation(capture)
    assert f"spread over {np.ptp(dots):.1f}" in question.explanation(capture)
    after = " ".join(slide("Why divide by √d_k").revealed(capture))
    assert ("saturating" in after) == (unscaled >= deck.SATURATED > scaled)


@pytest.mark.parametrize("text", TEXTS)
def test_the_neuron_answer_and_reason_are_the_heads_weights(text):
    view = dataclasses.replace(deck.NEURON, text=text)
    capture = view.result()
    weights = capture.stacks["encoder"].attentions[view.layer, view.head, view.query]  # the model's own
    top = capture.tokens[int(np.argmax(weights))]
    question = slide("A query meets the keys").question
    assert question.answer(capture) == top
    assert question.explanation(capture).startswith(f"The key of “{top}” gives the largest score")
    assert f"the most weight, {weights.max():.2f}" in question.explanation(capture)
    assert f"most weight on “{top}” ({weights.max():.2f})" in slide("A query meets the keys").compared(capture)[1]


@pytest.mark.parametrize("model", (DEFAULT_ENCODER, DEFAULT_DECODER))
@pytest.mark.parametrize("text", TEXTS[:2])
def test_the_heads_line_splits_the_models_width(model, text):
    capture = dataclasses.replace(slide("Many heads from one width").view, model=model, text=text).result()
    config = explorer.load_model(model).model.config
    width, heads = (getattr(config, name, None) or getattr(config, alias) for name, alias in
                    (("hidden_size", "n_embd"), ("num_attention_heads", "n_head")))  # fmt: skip
    line = slide("Many heads from one width").compared(capture)[1]
    assert line == f"This model: {width} / {heads} heads = {width // heads} per head"


PAIRS = (
    (deck.TEXT, deck.SECOND_TEXT),
    ("the bird flies south", "flies buzz around the fruit"),
    ("she flies home today", "the flies were everywhere in the kitchen"),
)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pair: pair[1])
def test_the_pair_answer_and_lines_are_the_heads_weights(pair):
    view = dataclasses.replace(slide("Two meanings of “flies”").view, text=pair[0], text_pair=pair[1])
    capture = view.result()
    encoded = explorer.load_model(DEFAULT_ENCODER).tokenizer(*pair)
    tokens, types = capture.tokens, np.array(encoded["token_type_ids"])
    assert list(capture.token_ids) == encoded["input_ids"]
    query = tokens.index("flies", int(np.argmax(types)))
    weights = capture.stacks["encoder"].attentions[deck.PAIR_LAYER, deck.HEAD, query]
    special = np.isin(tokens, ["[CLS]", "[SEP]"])
    shares = [weights[(types == 1) & ~special].sum(), weights[special].sum(), weights[(types == 0) & ~special].sum()]
    assert abs(sum(shares) - 1) < 1e-5
    question = slide("Two meanings of “flies”").question
    assert question.answer(capture) == deck.PAIR_CHOICES[int(np.argmax(shares))]
    percent = [f"{100 * share:.0f}%" for share in shares]
    assert question.explanation(capture) == (
        f"In layer {deck.PAIR_LAYER}, head {deck.HEAD}, the second “flies” puts {percent[0]} on its own sentence's "
        f"words, {percent[1]} on [CLS] and [SEP], {percent[2]} on the other sentence's words."
    )
    assert view.layers == (deck.PAIR_LAYER,) and view.head == deck.HEAD  # the view shows what the question asks
    reading = slide("Two meanings of “flies”").revealed(capture)[1]
    for query_at in (tokens.index("flies"), query):
        row = np.where(special, -1.0, weights if query_at == query else capture.stacks["encoder"].attentions[
            deck.PAIR_LAYER, deck.HEAD, query_at])  # fmt: skip
        row[query_at] = -1.0
        key = int(np.argmax(row))
        assert f"“{tokens[key]}” (#{key}) most ({row.max():.2f})" in reading


# -- counts and sizes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_the_count_gap_is_named_part_by_part_and_adds_up(model):
    anatomy = slide("Counting parameters").view.__class__(model).result()
    torch_model = explorer.load_model(model).model
    count = model_lecture_count(anatomy)
    assert count.actual_total == sum(p.numel() for p in torch_model.parameters())
    terms = formula_gap(anatomy, count)
    assert sum(term.parameters for term in terms) == count.actual_total - count.formula_total
    assert not any(term.reason == "not itemised" for term in terms), terms
    named = dict(torch_model.named_parameters())
    outside = [term for term in terms if not term.reason.startswith(("biases of", "relative", "layer", "other"))]
    for term in outside:  # a module of the model, counted from its own parameters
        module = term.reason.split(" ")[0]
        assert term.parameters == sum(p.numel() for name, p in named.items() if name.startswith(module + ".")), term
    layer_biases = re.compile(r"\.\d+\..*bias$")
    biases = sum(p.numel() for name, p in named.items() if layer_biases.search(name)
                 and not re.search(r"norm|\.ln_\d|relative_attention", name.lower()))  # fmt: skip
    assert next((t.parameters for t in terms if t.reason.startswith("biases of")), 0) == biases
    lines = slide("Counting parameters").compared(anatomy)
    assert f"the {count.actual_total - count.formula_total:,} between them" in lines[0]
    size = count.actual_total * 4
    assert f"{size / 1e6:,.1f} MB ({size / 2**20:,.1f} MiB) at 4 bytes" in lines[1]
    if model == DEFAULT_ENCODER:  # the numbers: the pooler is most of the gap
        assert ("pooler.dense", 147_840) in [(t.reason, t.parameters) for t in terms]
        assert count.actual_total - count.formula_total == 170_112


@pytest.mark.parametrize("model", MODELS)
def test_the_feed_forward_and_sizes_lines_are_the_models_config(model):
    config = explorer.load_model(model).model.config
    width = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None) or config.d_model
    ffn = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or getattr(config, "d_ff", 0)
    ffn = ffn or 4 * width
    anatomy = dataclasses.replace(slide("The feed-forward layer").view, model=model).result()
    assert f"This model: {width} → {ffn} → {width}" in slide("The feed-forward layer").compared(anatomy)[1]
    sizes = dataclasses.replace(slide("Sizes side by side").view, model=model)
    own = sizes.models(anatomy)[-1]
    assert own[1:] == (anatomy.layers, width, ffn, anatomy.heads)
    figure = sizes.figure(anatomy)(look=SLIDE)
    assert [trace.y[0] for trace in figure.data if trace.name == own[0]] == list(own[1:])  # its bar in each panel


@pytest.mark.parametrize("dates", [deck.DATES, ("Monday, June 7, 1999", "1999-06-07"), ("1 Jan 2000", "2000-01-01")])
def test_the_cross_attention_line_is_target_by_source(dates):
    view = dataclasses.replace(slide("Encoder and decoder: cross-attention").view, text=dates[0], target=dates[1])
    capture = view.result()
    cross = capture.stacks["cross"]
    line = slide("Encoder and decoder: cross-attention").compared(capture)[1]
    assert line == f"This model: {len(cross.query_tokens)} target rows × {len(cross.key_tokens)} source columns"


# -- attribution and patching -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [deck.ATTRIBUTION_TEXT, "Thomas said that", "The old queen knew that"])
def test_the_attribution_answer_and_lines_are_its_scores(text):
    view = dataclasses.replace(slide("Which words made it say that?").view, text=text)
    attribution = view.result()
    scores, tokens = attribution.scores, attribution.tokens
    earlier = int(np.argmax(scores[:-1]))
    question = slide("Which words made it say that?").question
    assert question.answer(attribution) == tokens[earlier]
    assert f"Blanking “{tokens[earlier]}” lowers" in question.explanation(attribution)
    assert f"by {scores[earlier]:.2f}" in question.explanation(attribution)
    after = slide("Which words made it say that?").revealed(attribution)[0]
    assert ("matters most of all" in after) == (int(np.argmax(scores)) == len(scores) - 1)


@pytest.mark.parametrize(
    "pair",
    [
        deck.PATCHING_PAIR,
        ("The mother said that", "The father said that"),
        ("The man was sure that", "The woman was sure that"),
    ],
)
def test_the_patching_answer_and_lines_are_its_recovery(pair):
    view = dataclasses.replace(slide("Where is the answer computed?").view, clean=pair[0], corrupted=pair[1])
    patching = view.result()
    last = patching.residual[:, -1]
    question = slide("Where is the answer computed?").question
    back = np.flatnonzero(last >= 0.5)
    expected = deck.NOWHERE if not back.size else deck._stream_label(patching, int(back[0]))
    assert question.answer(patching) == expected and expected in question.choices(patching)
    if back.size:
        assert f"{100 * last[back[0]]:.0f}% of it is back {expected}" in question.explanation(patching)
    changed = next(i for i, (a, b) in enumerate(zip(patching.clean_tokens, patching.corrupted_tokens, strict=True))
                   if a != b)  # fmt: skip
    carries = np.flatnonzero(patching.residual[:, changed] >= 0.5)
    after = slide("Where is the answer computed?").revealed(patching)[0]
    assert ("no layer brings back half" in after) == (not carries.size)
    if carries.size:
        assert deck._streams(patching, int(carries[0]), int(carries[-1])) in after


# -- the deck as a whole ------------------------------------------------------------------------------------------


STOP = {"their", "there", "which", "where", "other", "about", "these", "those", "every", "after", "before"}


def significant(text: str) -> set[str]:
    """The words that carry a sentence's content: five letters or more, or a bracketed token, plural s dropped."""
    words = re.findall(r"\[[A-Za-z]+\]|[\w']+", text.lower().replace("’", "'"))
    return {
        word.removesuffix("'s").removesuffix("s")
        for word in words
        if (len(word) >= 5 or word.startswith("[")) and word not in STOP
    }


QUESTIONS = [number for number, shown in enumerate(ANATOMY.slides, 1) if shown.question]


@pytest.mark.parametrize("number", QUESTIONS)
def test_no_line_shown_before_the_answer_gives_it_away(number):
    shown = ANATOMY.slide(number)
    result = shown.view.result()
    question = shown.question
    before = [*shown.look, *filter(None, [shown.ran_instead()])]
    answer = question.answer(result)
    asked = significant(" ".join([question.ask, shown.title, *question.choices(result)]))
    told = significant(" ".join([question.explanation(result), *shown.revealed(result)])) - asked
    named = answer.lower() in question.ask.lower()  # a question may name its answer among others ("flies")
    for line in before:
        assert named or not re.search(rf"(?<!\w){re.escape(answer.lower())}(?!\w)", line.lower()), (line, answer)
        assert question.explanation(result) not in line
        shared = significant(line) & told
        assert len(shared) < 2, (line, shared)


def drawn(figure) -> str:
    """What a figure draws, without its title: a Plotly figure's traces, a page's HTML, a chart's data."""
    if hasattr(figure, "figure") and callable(figure.figure):
        figure = figure.figure()
    if hasattr(figure, "to_plotly_json"):
        return json.dumps(json.loads(pio.to_json(figure, validate=False))["data"], sort_keys=True)
    if hasattr(figure, "html"):
        return figure.html
    return json.dumps(figure.to_dict(validate=False).get("datasets"), sort_keys=True, default=str)


def test_no_two_consecutive_slides_draw_the_same_figure():
    figures = []
    for shown in ANATOMY.slides:
        result = shown.view.result()
        figures.append((type(shown.view), shown.view, drawn(shown.view.figure(result)(look=SLIDE))))
    for number, (first, second) in enumerate(itertools.pairwise(figures), 1):
        assert first[:2] != second[:2], f"slides {number} and {number + 1} show the same view"
        assert first[2] != second[2], f"slides {number} and {number + 1} draw the same figure"
