"""The generation deck says only what its data shows (issue 38): every line, answer, explanation and count that
speaks of the data is computed from the slide's result, and holds on the slide's own prompt and on two others,
checked against references nobody here wrote (a plain forward pass, generate(), transformers' logits
processors). And the deck teaches: one figure per slide, no hint before the answer, choices in an order of their
own."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

import explorer
from explorer.lecture import DECKS, GENERATION
from explorer.lecture import generation as deck
from explorer.lecture.deck import in_order
from explorer.models.tokens import token_labels
from explorer.render.decoding import CHAR_WIDTH, LINE_HEIGHT, cell_labels
from explorer.render.style import SCREEN, SLIDE, presentation_look, text_width
from tests.figures import written

OTHERS = ("The old house on the hill was", "She opened the letter and")
PROMPTS = (None, *OTHERS)  # None: the slide's own prompt
PROJECTORS = (presentation_look(1280, 520, wide=True), presentation_look(1920, 800, wide=True))


def _number(title: str) -> int:
    return next(n for n, slide in enumerate(GENERATION.slides, 1) if slide.title == title)


@pytest.fixture(scope="module")
def lm():
    return explorer.load_model(explorer.DEFAULT_DECODER)


@pytest.fixture(scope="module")
def ran():
    """slide title, prompt -> (the slide's view on that prompt, its result), computed once."""
    cache = {}

    def run(title: str, prompt: str | None):
        if (title, prompt) not in cache:
            view = GENERATION.slide(_number(title)).view
            view = view if prompt is None else dataclasses.replace(view, prompt=prompt)
            cache[(title, prompt)] = view, view.result()
        return cache[(title, prompt)]

    return run


def _ids(lm, text: str) -> torch.Tensor:
    return lm.tokenizer(text, return_tensors="pt").input_ids


def _logits(lm, ids) -> torch.Tensor:
    with torch.inference_mode():
        return lm.model(input_ids=torch.as_tensor(ids)[None] if torch.as_tensor(ids).ndim == 1 else ids).logits[0]


def _continuation_logprobs(lm, trace) -> np.ndarray:
    """The generated tokens' log-probabilities from one plain forward pass over the whole text."""
    sequence = torch.tensor(np.array(trace.sequences[0]))
    logprobs = torch.log_softmax(_logits(lm, sequence).double(), dim=-1)
    start = trace.prompt_length
    return np.array([float(logprobs[i - 1, sequence[i]]) for i in range(start, len(sequence))])


def _numbers(line: str) -> list[float]:
    return [float(n.replace(",", "").replace("−", "-")) for n in re.findall(r"[−-]?\d[\d,]*\.?\d*", line)]


# -- claims, on the slide's prompt and two others ------------------------------------------------------------


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_takes_the_likeliest_first_token_and_says_so(ran, lm, prompt):
    slide = GENERATION.slide(_number("One token at a time"))
    _, trace = ran(slide.title, prompt)
    first = torch.softmax(_logits(lm, _ids(lm, trace.prompt))[-1].double(), dim=-1)
    best = int(first.argmax())
    answer = slide.question.answer(trace)
    assert answer == deck.mark_leading_space(token_labels(lm.tokenizer, [best])[0])
    assert answer in slide.question.explanation(trace) and f"{100 * float(first[best]):.2f}%" in (
        slide.question.explanation(trace)
    )
    shares = dict(zip(slide.question.choices(trace), slide.question.model_shares(trace), strict=True))
    assert shares[answer] == pytest.approx(float(first[best]), abs=1e-5)  # shares follow the choices' order


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_chain_rule_and_log_slides_draw_the_models_own_log_probabilities(ran, lm, prompt):
    chain, trace = ran("The chain rule", prompt)
    reference = _continuation_logprobs(lm, trace)
    figure = chain.figure(trace)(look=SLIDE)
    bars, running = figure.data[0], figure.data[1]
    np.testing.assert_allclose(np.asarray(bars.y, dtype=float), reference, atol=1e-4)
    np.testing.assert_allclose(np.asarray(running.y, dtype=float), np.cumsum(reference), atol=1e-3)
    assert f"{reference.sum():.2f}" in GENERATION.slide(_number("The chain rule")).compared(trace)[0]
    products, same = ran("Why log-probabilities", prompt)
    product = products.figure(same)(look=SLIDE).data[0]
    np.testing.assert_allclose(np.asarray(product.y, dtype=float), np.exp(np.cumsum(reference)), rtol=1e-3)
    (told,) = GENERATION.slide(_number("Why log-probabilities")).revealed(same)
    low, high = math.exp(reference[0]), math.exp(reference.sum())
    assert f"{low:.3g}" in told and f"{high:.3g}" in told and high <= low


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_loop_the_greedy_slide_names_comes_back(ran, prompt):
    slide = GENERATION.slide(_number("Greedy search repeats itself"))
    _, trace = ran(slide.title, prompt)
    tokens = trace.generated_tokens[0]
    pairs = [tuple(tokens[i : i + 2]) for i in range(len(tokens) - 1)]
    (told,) = slide.revealed(trace)
    if "comes back" in told and "No pair" not in told:
        count = int(re.search(r"comes back (\d+) times", told).group(1))
        assert count == max(pairs.count(pair) for pair in pairs) >= 3
    else:
        assert max(pairs.count(pair) for pair in pairs) < 3
    if prompt is None:
        assert "comes back" in told and "No pair" not in told  # the slide's point, on its own prompt


@pytest.mark.parametrize("prompt", PROMPTS)
def test_beam_against_greedy_and_the_ban_are_said_as_the_model_scores_them(ran, lm, prompt):
    slide = GENERATION.slide(_number("Greedy, beam, and a ban"))
    _, traces = ran(slide.title, prompt)
    greedy, beam, banned = (_continuation_logprobs(lm, trace).sum() for trace in traces.values())
    greedy, beam = round(greedy, 2), round(beam, 2)
    expected = "beam search" if beam > greedy else "greedy search" if greedy > beam else "the same"
    assert slide.question.answer(traces) == expected
    why = slide.question.explanation(traces)
    assert f"{beam:.2f}" in why and f"{greedy:.2f}" in why
    (told,) = slide.revealed(traces)
    _, beam_trace, banned_trace = traces.values()
    left = _repeated_pairs(banned_trace.generated_tokens[0])
    before = _repeated_pairs(beam_trace.generated_tokens[0])
    assert f"repeats {left} 2-grams where beam search alone repeats {before}" in told
    cost = round(beam, 2) - round(float(banned), 2)
    assert ("costs" in told) == (cost > 0) and ("likelier" in told) == (cost < 0)


def _repeated_pairs(tokens) -> int:
    pairs = [tuple(tokens[i : i + 2]) for i in range(len(tokens) - 1)]
    return len(pairs) - len(set(pairs))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_temperature_two_flattens_as_transformers_warper_says(ran, prompt):
    slide = GENERATION.slide(_number("Temperature"))
    _, logits = ran(slide.title, prompt)
    scores = torch.tensor(np.array(logits.logits))[None]
    top = {t: float(torch.softmax(TemperatureLogitsWarper(t)(None, scores.clone()), -1).max()) for t in (0.5, 1.0, 2.0)}
    assert slide.question.answer(logits) == ("it falls" if top[2] < top[1] else "it rises")
    assert f"{100 * top[1]:.1f}% at T = 1 to {100 * top[2]:.1f}% at T = 2" in slide.question.explanation(logits)
    (told,) = slide.revealed(logits)
    assert ("T = 2 flattens" in told) == (top[2] < top[1]) and ("T = 0.5 sharpens" in told) == (top[0.5] > top[1])


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_tail_and_the_nucleus_are_counted_as_transformers_cuts_them(ran, prompt):
    held = GENERATION.slide(_number("Most tokens are very unlikely"))
    _, distribution = ran(held.title, prompt)
    p = np.sort(distribution.stages[0][1].astype(np.float64))[::-1]
    most = int(np.argmax(np.cumsum(p) >= 0.99)) + 1
    assert f"Here {most:,} of {len(p):,} tokens hold 99%" in held.revealed(distribution)[0]
    stages = GENERATION.slide(_number("Top-k and top-p"))
    _, distribution = ran(stages.title, prompt)
    scores = torch.tensor(np.array(distribution.logits))[None]
    kept = TopPLogitsWarper(0.9)(None, TopKLogitsWarper(50)(None, scores.clone()))
    count = int(torch.isfinite(kept).sum())
    assert stages.question.answer(distribution) == str(count)
    assert f"the likeliest {count} add up to" in stages.question.explanation(distribution)


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("title", ["A flat distribution", "A peaky distribution"])
def test_a_fixed_k_is_weighed_against_top_p_on_the_distribution_drawn(ran, title, prompt):
    slide = GENERATION.slide(_number(title))
    view, distribution = ran(title, prompt)
    assert (view.top_k, view.top_p) == (deck.TOP_K, deck.TOP_P)  # drawn with the k the sentence speaks of
    scores = torch.tensor(np.array(distribution.logits))[None]
    nucleus = int(torch.isfinite(TopPLogitsWarper(deck.TOP_P)(None, scores.clone())).sum())
    p = np.sort(torch.softmax(scores[0].double(), -1).numpy())[::-1]
    (told,) = slide.revealed(distribution)
    k = deck.TOP_K
    if title == "A flat distribution":
        holds = nucleus > k
        assert holds == ("cuts none" not in told)
        if holds:
            assert f"cuts {100 * p[k:].sum():.1f}% of the probability" in told and f"{nucleus - k:,} of" in told
    else:
        junk = p[:k][p[:k] < p[0] * deck.JUNK]  # tokens top-k keeps that min-p = 0.01 would cut
        holds = len(junk) > 0
        assert holds == ("at least 1/100" not in told)
        if holds:
            assert f"keeps {len(junk)} tokens here under 1/100 of the likeliest's {100 * p[0]:.1f}%" in told
            assert f"{100 * junk.sum():.1f}% together" in told
    if prompt is None:
        assert holds, told  # the slide's point holds on its own prompt
    moved = dataclasses.replace(view, top_k=0)
    assert slide.revealed(moved.distribution(ran(title, prompt)[1])) == ()  # no fixed k, no sentence about one


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_likeliest_strategy_is_the_one_with_the_highest_log_probability(ran, prompt):
    slide = GENERATION.slide(_number("Which strategy is best?"))
    _, traces = ran(slide.title, prompt)
    best = max(traces, key=lambda label: float(traces[label].sequence_logprobs[0]))
    assert slide.question.answer(traces) == best
    why = slide.question.explanation(traces)
    assert all(f"{label} {float(trace.sequence_logprobs[0]):.2f}" in why for label, trace in traces.items())


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_cache_slide_counts_the_rows_it_draws_and_they_are_generates(ran, lm, prompt):
    """Item 2: a row per pass that ran (the prompt's, then each token fed back), none for the last token; the
    sentence counts the rows drawn; the rows are generate()'s own ``output_attentions``."""
    slide = GENERATION.slide(_number("The KV cache"))
    view, trace = ran(slide.title, prompt)
    figure = view.figure(trace)(look=SLIDE)
    drawn_rows = len(figure.data[0].z)
    generated = len(trace.generated_tokens[0])
    assert drawn_rows == trace.prompt_length + generated - 1
    line = slide.compared(trace)[1]
    assert f"the prompt's {trace.prompt_length} tokens in one pass" in line
    assert f"each of the {drawn_rows - trace.prompt_length} fed back" in line and f"first of {generated} new" in line
    ids = torch.tensor(np.array(trace.prompt_ids))[None]
    with torch.inference_mode():
        out = lm.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=generated,
            output_attentions=True,
            return_dict_in_generate=True,
            pad_token_id=lm.tokenizer.eos_token_id,
        )
    assert out.sequences[0].tolist() == list(trace.sequences[0])
    stack, prompt_length = trace.attention["decoder"], trace.prompt_length
    assert stack.attentions.shape[-2] == len(out.attentions) - 1 + prompt_length  # one pass per row block
    for layer, weights in enumerate(out.attentions[0]):
        np.testing.assert_allclose(
            stack.attentions[layer, :, :prompt_length, :prompt_length], weights[0].numpy(), atol=1e-5
        )
    for step, layers in enumerate(out.attentions[1:], start=1):
        row = prompt_length + step - 1
        for layer, weights in enumerate(layers):
            np.testing.assert_allclose(stack.attentions[layer, :, row, : row + 1], weights[0, :, 0].numpy(), atol=1e-5)


# -- one point per slide, no hint, no order that answers -------------------------------------------------------


def _drawn(figure) -> str:
    """What a figure draws (its data, not its size or title), as text to compare."""
    if hasattr(figure, "to_plotly_json"):
        return json.dumps(figure.to_plotly_json()["data"], sort_keys=True, default=str)
    return json.dumps(figure.spec.get("datasets", figure.spec), sort_keys=True, default=str)


def test_no_two_consecutive_slides_draw_the_same_figure(ran):
    """Different view classes draw different figures; two slides of one class in a row must differ in what they
    draw (their figures' data), not only in their settings."""
    views = [slide.view for slide in GENERATION.slides]
    for number in range(1, len(views)):
        first, second = GENERATION.slide(number), GENERATION.slide(number + 1)
        assert first.view != second.view, (number, number + 1)
        if type(first.view) is type(second.view):
            drawn = [
                _drawn(view.figure(result)(look=SLIDE))
                for view, result in (ran(s.title, None) for s in (first, second))
            ]
            assert drawn[0] != drawn[1], f"slides {number} and {number + 1} draw the same figure"
    assert type(views[0]) is not type(views[1]) is not type(views[2])  # the chain rule and logs get figures


STOP = set("about above after again against also among because before being between both could does doing".split())
# The setting's own words: a question's lines name them before the answer, as its ask does.
SETTING = {
    "logits",
    "softmax",
    "token",
    "tokens",
    "likeliest",
    "probability",
    "probabilities",
    "search",
    "greedy",
    "keeps",
}


def _stems(text: str) -> set[str]:
    words = {word.casefold() for word in re.findall(r"[A-Za-z][A-Za-z-]{4,}", text)}
    return {word[:5] for word in words - STOP - SETTING}


def _giveaways(slide, result) -> set[str]:
    """The answer, or words of its explanation and of the lines shown with it, in what shows before it."""
    before = " ".join((*slide.look, *filter(None, [slide.ran_instead()]))).casefold()
    answer = slide.question.answer(result)
    if answer.casefold().strip() in before:
        return {answer}
    told = " ".join((slide.question.explanation(result), *slide.revealed(result), *slide.compared(result)))
    giveaway = _stems(told) - _stems(slide.question.ask) - _stems(" ".join(slide.question.choices(result)))
    return giveaway & _stems(before)


def test_no_line_before_the_answer_gives_it_away(ran):
    asked = [(n, slide) for n, slide in enumerate(GENERATION.slides, 1) if slide.question is not None]
    for number, slide in asked:
        assert not _giveaways(slide, ran(slide.title, None)[1]), number
    assert len(asked) >= 5
    temperature = GENERATION.slide(_number("Temperature"))  # the case: the hint the slide used to give
    hinted = dataclasses.replace(temperature, look=(*temperature.look[:1], "T < 1 sharpens, T > 1 flattens."))
    assert "flatt" in _giveaways(hinted, ran(temperature.title, None)[1])


def test_choices_come_in_an_order_of_their_own_on_both_decks(ran):
    assert in_order(["12", "3", "1,000"]) == ("3", "12", "1,000")
    assert in_order(["␣the", "beam", "Greedy"]) == ("beam", "Greedy", "␣the")
    firsts = []
    for deck_name, deck_ in DECKS.items():
        for slide in deck_.slides:
            if slide.question is None:
                continue
            result = ran(slide.title, None)[1] if deck_name == "generation" else slide.view.result()
            choices = slide.question.choices(result)
            assert choices == in_order(choices), (deck_name, slide.title)  # not the model's order; the same for all
            firsts.append(choices.index(slide.question.answer(result)) == 0)
    assert not all(firsts) and len(firsts) >= 8
    first = GENERATION.slide(1).question
    trace = ran(GENERATION.slide(1).title, None)[1]
    assert first.choices.raw(trace)[0] == first.answer(trace)  # the model's own order put the answer first


# -- the 32-step grids, readable on both projectors ------------------------------------------------------------


@pytest.mark.parametrize("look", [*PROJECTORS, SLIDE, SCREEN], ids=["1280", "1920", "slide", "screen"])
@pytest.mark.parametrize("title", ["Sampling, seeded", "Greedy search repeats itself"])
def test_cell_labels_fit_their_cells_at_32_steps(ran, look, title):
    view = GENERATION.slide(_number(title)).view  # both slides draw 32 steps
    trace = view.result()  # computed once: the gateway keeps it
    assert trace.num_steps == 32
    figure = view.figure(trace)(look=look)
    layout, heatmap = figure.layout, figure.data[0]
    # The cell from the figure's own geometry: the plot's width over its 32 columns (less than the figure's
    # width without margins and the colour bar's title), the top panel's height over its 5 rows.
    title_room = max(text_width(line, look.font_size) for line in heatmap.colorbar.title.text.split("<br>"))
    width = (layout.width - layout.margin.l - layout.margin.r - title_room) / 32
    top = layout.height - layout.margin.t - layout.margin.b
    height = top * (layout.yaxis.domain[1] - layout.yaxis.domain[0]) / 5
    if heatmap.texttemplate:
        size = heatmap.textfont.size
        for label in np.asarray(heatmap.text).ravel():
            lines = written(label).split("<br>")
            assert max(len(line) for line in lines) * CHAR_WIDTH * size <= width, (label, width)
            assert len(lines) * LINE_HEIGHT * size <= height
    else:
        assert layout.annotations, "no cell labels"
        for note in layout.annotations:
            assert note.textangle == -90
            assert len(note.text) * CHAR_WIDTH * note.font.size <= height and LINE_HEIGHT * note.font.size <= width
    if look.presentation:  # readable: at least three quarters of the projector's tick size, never none
        size = heatmap.textfont.size if heatmap.texttemplate else layout.annotations[0].font.size
        assert size >= 0.75 * look.tick_size and (heatmap.texttemplate or layout.annotations)


def test_cell_labels_turn_then_give_up_as_cells_narrow():
    names = [["␣the", "␣house"]]
    probs = np.array([[0.5, 0.25]])
    assert cell_labels(names, probs, 120, 60, SLIDE).upright
    assert (
        cell_labels(names, probs, 60, 30, SLIDE).upright
        and "<br>" not in cell_labels(names, probs, 60, 30, SLIDE).texts[0][0]
    )
    turned = cell_labels(names, probs, 30, 120, SLIDE)
    assert turned.turned and not turned.upright
    assert cell_labels(names, probs, 8, 8, SLIDE).texts == ()
