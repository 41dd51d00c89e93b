"""The lecture decks (issue 28): every slide's view computes and draws on the bundled models, the decks cover the
inventory's artifacts, the sources' numbers sit beside the model's own, and every question's answer is among its
choices and is what the model did."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import explorer
from explorer.errors import InputError
from explorer.lecture import ANATOMY, DECKS, GENERATION, Slide, tour
from explorer.lecture import anatomy as anatomy_deck
from explorer.render.style import look_for

SLIDES = [(name, number) for name, deck in DECKS.items() for number in range(1, len(deck) + 1)]
# The list of artifacts (../shared/notes/seed-artifacts.md) and the concepts it names.
REQUIRED = {
    "anatomy": {1, 3, 4, 5, 6, 7, 8, 11, 13, 14, 15, 16, "scaling by √d_k"},
    "generation": {18, 20, 21, 23, 24, 26, 27, "the KV cache"},
}


@pytest.fixture(scope="module")
def results():
    """Each slide's result, computed once through the gateway (as the Lecture page will)."""
    return {(name, number): DECKS[name].slide(number).view.result() for name, number in SLIDES}


def test_the_decks_cover_the_inventory_in_at_least_24_slides():
    assert sum(len(deck) for deck in DECKS.values()) >= 24
    for name, required in REQUIRED.items():
        assert required <= DECKS[name].shows(), required - DECKS[name].shows()
    questions = [slide for deck in DECKS.values() for slide in deck.slides if slide.question]
    assert len(questions) >= 8


def test_slides_are_numbered_from_one_and_others_are_refused():
    assert ANATOMY.slide(1) is ANATOMY.slides[0] and GENERATION.slide(len(GENERATION)) is GENERATION.slides[-1]
    for number in (0, len(ANATOMY) + 1, -1, True, "2", 1.0):
        with pytest.raises(InputError, match="slides 1 to"):
            ANATOMY.slide(number)


def test_a_slide_says_what_to_look_at_in_three_lines_at_most():
    with pytest.raises(ValueError, match="one to three lines"):
        Slide("Too much", ANATOMY.slide(1).view, ("a", "b", "c", "d"), "notes", (1,))
    assert all(1 <= len(slide.look) <= 3 and slide.notes for deck in DECKS.values() for slide in deck.slides)


@pytest.mark.parametrize(("name", "number"), SLIDES, ids=[f"{name}-{number}" for name, number in SLIDES])
def test_every_slide_draws_its_view_and_compares_with_the_source(results, name, number):
    slide = DECKS[name].slide(number)
    result = results[(name, number)]
    figure = slide.view.figure(result)(look=look_for(1920, 1080, presentation=True))
    assert figure is not None and slide.view.info(result).title
    lines = slide.compared(result)
    assert all(isinstance(line, str) and line for line in lines)
    if slide.against is not None:
        assert len(lines) >= 1
    if slide.question is not None:
        choices = slide.question.choices(result)
        assert len(choices) >= 2 and len(set(choices)) == len(choices)
        assert slide.question.answer(result) in choices
        assert slide.question.ask.endswith("?") and slide.question.why


def test_the_tokenization_slide_gives_the_chapters_ids(results):
    number = next(i for i, slide in enumerate(ANATOMY.slides, 1) if 1 in slide.shows)
    vectors = results[("anatomy", number)]
    assert tuple(row.token_id for row in vectors.rows if not row.special) == (2051, 10029, 2066, 2019, 8612)
    assert "(the same)" in ANATOMY.slide(number).compared(vectors)[0]
    assert ANATOMY.slide(number).question.answer(vectors) == "7"


def test_the_head_view_slide_gives_the_chapters_13_ids_and_token_types(results):
    number = next(i for i, slide in enumerate(ANATOMY.slides, 1) if 7 in slide.shows)
    capture = results[("anatomy", number)]
    assert tuple(capture.token_ids.tolist()) == anatomy_deck.PAIR_IDS
    assert "(the same)" in ANATOMY.slide(number).compared(capture)[1]


def test_the_neuron_slides_answer_is_the_heads_largest_weight(results):
    number = next(i for i, slide in enumerate(ANATOMY.slides, 1) if 4 in slide.shows)
    capture = results[("anatomy", number)]
    weights = capture.stacks["encoder"].attentions[0, 8, 2]  # layer 0, head 8, query "flies"
    assert capture.tokens[2] == "flies"
    assert ANATOMY.slide(number).question.answer(capture) == capture.tokens[int(np.argmax(weights))]


def test_the_greedy_slide_prints_the_models_own_first_step(results):
    trace = results[("generation", 1)]
    expected = explorer.decode(
        explorer.load_model(explorer.DEFAULT_DECODER), "Transformers are the", strategy="greedy", max_new_tokens=8
    )
    first = expected.steps[0]
    line = GENERATION.slide(1).compared(trace)[1]
    assert f"{100 * float(first.candidate_probs[0, 0]):.2f}%" in line
    assert "8.53%" in GENERATION.slide(1).compared(trace)[0]


def test_a_slide_runs_the_sources_model_when_it_is_at_hand_and_says_so_when_not():
    slide = ANATOMY.slide(1)
    assert slide.with_model(lambda name: False) is slide
    assert "bert-base-uncased" in slide.ran_instead() and explorer.DEFAULT_ENCODER in slide.ran_instead()
    swapped = slide.with_model(lambda name: name == "bert-base-uncased")
    assert swapped.view == dataclasses.replace(slide.view, model="bert-base-uncased")
    assert swapped.ran_instead() is None


# The anatomy deck's questions are on slides 1, 5, 6, 7, 9, 16 and 17 (checked in the test).
@pytest.mark.parametrize(
    ("link", "answers", "problems"),
    [
        ("1-0.5-r", {1: 0, 5: tour.REVEALED}, []),
        ("²-1", {}, ["“²-1” is not a slide number and a choice"]),  # "²".isdigit(), int("²") raises
        ("1-²", {}, ["“1-²” is not a slide number and a choice"]),
        ("9" * 5_000 + "-1", {}, [f"“{'9' * 20}” is not a slide number and a choice"]),  # int() refuses 4,300+
        ("1-" + "9" * 5_000, {}, [f"“1-{'9' * 18}” is not a slide number and a choice"]),
        ("1-50", {}, ["“1-50” is not a slide number and a choice"]),  # more choices than any question has
        (
            ".".join(f"x{i}-y" for i in range(95)) + ".2-0.3-1.4-0.8-0.1-1",
            {1: 1},
            [
                "95 pairs are not a slide number and a choice (“x0-y”, “x1-y”, “x2-y” and 92 more)",
                "slides 2, 3, 4 and 1 more ask no question",
            ],
        ),
        ("2-0.99-0", {}, ["slides 2 and 99 ask no question"]),
        ("1-0." * 150, {1: 0}, ["50 pairs past the first 100"]),
    ],
    ids=[
        "good",
        "superscript-slide",
        "superscript-choice",
        "5000-digit-slide",
        "5000-digit-choice",
        "choice-50",
        "95-bad-pairs",
        "two-unasked",
        "150-pairs",
    ],
)
def test_a_links_answers_say_what_was_ignored_in_three_phrases_at_most(link, answers, problems):
    assert tour.questions(ANATOMY) == [1, 5, 6, 7, 9, 16, 17]
    assert tour.read_answers(link, ANATOMY) == (answers, problems)
