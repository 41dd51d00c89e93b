"""What a lecture deck is made of: slides, each one live view of the app, and predict-then-reveal questions.

A slide holds no result: its view (an ``explorer.views`` object: inputs → ``result()`` → ``figure()``) computes
it through the gateway like any page, and the slide's ``against`` and ``question`` read that result, so the
numbers a slide prints beside the source's are the model's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from explorer.errors import InputError


@dataclass(frozen=True)
class Question:
    """Predict, then reveal: asked before the view shows. ``choices`` and ``answer`` read the view's result, so
    the choices are the model's own (its candidates, its tokens) and the answer is what the model did."""

    ask: str
    choices: Callable[[object], tuple[str, ...]]
    answer: Callable[[object], str]
    # one sentence, shown with the answer: fixed, or result -> the sentence where it speaks of the data
    why: str | Callable[[object], str]
    # result -> the model's own share of each choice (probabilities, attention weights), shown beside a class's
    # answers; None where the model has no distribution over the choices (then its answer counts as all of it)
    shares: Callable[[object], tuple[float, ...]] | None = None

    def __post_init__(self):
        # The model's own order (its likeliest candidate first) would give the answer away: every question's
        # choices come in an order of their own (numbers by value, words alphabetically), the same for every
        # student, so a class's votes by index stay comparable.
        object.__setattr__(self, "choices", _InOrder(self.choices))

    def explanation(self, result) -> str:
        """The ``why`` sentence for this result."""
        return self.why(result) if callable(self.why) else self.why

    def model_shares(self, result) -> tuple[float, ...]:
        """The model's share of each choice: its own distribution where it has one, else all on its answer."""
        choices = self.choices(result)
        if self.shares is not None:
            share = dict(zip(self.choices.raw(result), self.shares(result), strict=True))
            return tuple(float(share[choice]) for choice in choices)
        truth = self.answer(result)
        return tuple(1.0 if choice == truth else 0.0 for choice in choices)


def in_order(choices) -> tuple[str, ...]:
    """``choices`` by value when all are numbers, else alphabetically (case and a leading mark ignored)."""
    choices = tuple(choices)
    try:
        return tuple(sorted(choices, key=lambda choice: float(choice.replace(",", ""))))
    except ValueError:
        return tuple(sorted(choices, key=lambda choice: (choice.strip("␣ \"'“”").casefold(), choice)))


class _InOrder:
    """A question's choices callable, its result put ``in_order``; ``raw`` is the callable as written."""

    def __init__(self, raw):
        self.raw = getattr(raw, "raw", raw)  # dataclasses.replace builds the question again: wrap once

    def __call__(self, result) -> tuple[str, ...]:
        return in_order(self.raw(result))


@dataclass(frozen=True)
class Slide:
    """One slide: a short title, one live view, at most three lines on what to look at, and speaker notes.

    shows          what it shows: numbers of ``../shared/notes/seed-artifacts.md``'s inventory, or a concept
    look           where to look, shown before the answer: no claim about the data, nothing that answers
    against        result -> lines: each source's printed number beside this model's (empty where none)
    chapter_model  the model the source used; the slide runs it instead of the bundled one when it is at hand
    """

    title: str
    view: object
    look: tuple[str, ...]
    notes: str
    shows: tuple[int | str, ...]
    against: Callable[[object], tuple[str, ...]] | None = None
    question: Question | None = None
    chapter_model: str | None = None
    # lines shown only once the question is answered or revealed (at once on a slide without one): they would give
    # the answer away; fixed, or result -> lines computed from the result (a claim about the data that does not
    # hold for this result is left out)
    after_reveal: tuple[str, ...] | Callable[[object], tuple[str, ...]] = ()

    def __post_init__(self):
        if not 1 <= len(self.look) <= 3:
            raise ValueError(f"{self.title!r}: a slide says what to look at in one to three lines")

    def compared(self, result) -> tuple[str, ...]:
        return self.against(result) if self.against else ()

    def revealed(self, result) -> tuple[str, ...]:
        """The ``after_reveal`` lines for this result."""
        return tuple(self.after_reveal(result) if callable(self.after_reveal) else self.after_reveal)

    def with_model(self, available: Callable[[str], bool]) -> Slide:
        """This slide on the source's own model when ``available(name)`` says it is at hand (in the Hub cache),
        else as it is, on the bundled model (``ran_instead`` then says so)."""
        if self.chapter_model is None or not available(self.chapter_model):
            return self
        return dataclasses.replace(self, view=dataclasses.replace(self.view, model=self.chapter_model))

    def ran_instead(self) -> str | None:
        """One line when the slide runs a bundled model in place of the one the source named."""
        model = getattr(self.view, "model", None)
        if self.chapter_model is None or model == self.chapter_model:
            return None
        return f"The source ran {self.chapter_model}; it is not on this machine, so this slide runs {model}."


@dataclass(frozen=True)
class Deck:
    """A lecture: its slides in order, numbered from 1."""

    name: str
    title: str
    slides: tuple[Slide, ...]

    def __len__(self) -> int:
        return len(self.slides)

    def slide(self, number: int) -> Slide:
        """Slide ``number`` (1 is the first); ``InputError`` outside the deck."""
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(self.slides):
            raise InputError(f"The {self.title} deck has slides 1 to {len(self.slides)} (got {number!r}).")
        return self.slides[number - 1]

    def shows(self) -> set[int | str]:
        """Every artifact and concept the deck shows."""
        return {shown for slide in self.slides for shown in slide.shows}
