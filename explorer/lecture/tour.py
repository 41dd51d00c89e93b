"""A viewer's answers to a deck's questions, kept in the link so that a tour at home resumes from it.

Answers are written as ``slide-choice`` pairs joined by dots (``4-0.7-2``: slide 4, its first choice; slide 7,
its third), the choice counted from 0 in the question's choices, which come from the model's own result and are
the same on every run. Nothing is stored on the server: the link is the record, and a crafted one gives a notice
for what does not fit, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping

from explorer.checks import whole_number
from explorer.lecture.deck import Deck

MAX_CHOICES = 50  # more than any question offers; a crafted link's larger index is refused
MAX_PAIRS = 100  # more than any deck's questions; a crafted link's further pairs are not read
REVEALED = -1  # shown without an answer (the presenter asked the room): written "r"
SHOWN = 3  # pairs a problem quotes; it counts the others


def read_answers(text: str | None, deck: Deck) -> tuple[dict[int, int], list[str]]:
    """({slide number: choice index}, problems) from a link's ``answers`` value (``"4-0.7-2"``). The problems are
    three phrases at most however many pairs did not fit (a notice each would bury the slide): the pairs that are
    not a slide number and a choice, the slides that ask no question, and the pairs past ``MAX_PAIRS``."""
    answers: dict[int, int] = {}
    malformed: list[str] = []
    unasked: set[int] = set()
    parts = [part for part in (text or "").split(".") if part]
    for part in parts[:MAX_PAIRS]:
        slide_text, _, choice_text = part.partition("-")
        slide = whole_number(slide_text, digits=4)
        choice = REVEALED if choice_text == "r" else whole_number(choice_text, digits=2)
        if slide is None or choice is None or choice >= MAX_CHOICES:
            malformed.append(part)
        elif not 1 <= slide <= len(deck) or deck.slides[slide - 1].question is None:
            unasked.add(slide)
        else:
            answers[slide] = choice
    beyond = f"{len(parts) - MAX_PAIRS} pairs past the first {MAX_PAIRS}" if len(parts) > MAX_PAIRS else None
    problems = (_malformed(malformed), _unasked(sorted(unasked)), beyond)
    return answers, [problem for problem in problems if problem]


def _malformed(parts: list[str]) -> str | None:
    quoted = [f"“{part[:20]}”" for part in parts]
    if len(parts) <= 1:
        return f"{quoted[0]} is not a slide number and a choice" if parts else None
    return f"{len(parts)} pairs are not a slide number and a choice ({_listed(quoted)})"


def _unasked(slides: list[int]) -> str | None:
    if len(slides) <= 1:
        return f"slide {slides[0]} asks no question" if slides else None
    return f"slides {_listed([str(slide) for slide in slides])} ask no question"


def _listed(items: list[str]) -> str:
    """“a, b and c”, or “a, b, c and 7 more”."""
    if len(items) > SHOWN:
        return f"{', '.join(items[:SHOWN])} and {len(items) - SHOWN} more"
    return f"{', '.join(items[:-1])} and {items[-1]}"


def write_answers(answers: Mapping[int, int]) -> str:
    """The link's ``answers`` value: the inverse of ``read_answers``."""
    return ".".join(f"{slide}-{'r' if choice == REVEALED else choice}" for slide, choice in sorted(answers.items()))


def questions(deck: Deck) -> list[int]:
    """The numbers of the slides that ask a question."""
    return [number for number, slide in enumerate(deck.slides, 1) if slide.question is not None]
