"""A viewer's answers to a deck's questions, kept in the link so that a tour at home resumes from it.

Answers are written as ``slide-choice`` pairs joined by dots (``4-0.7-2``: slide 4, its first choice; slide 7,
its third), the choice counted from 0 in the question's choices, which come from the model's own result and are
the same on every run. Nothing is stored on the server: the link is the record, and a crafted one gives a notice
for what does not fit, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping

from explorer.lecture.deck import Deck

MAX_CHOICES = 50  # more than any question offers; a crafted link's larger index is refused
REVEALED = -1  # shown without an answer (the presenter asked the room): written "r"


def read_answers(text: str | None, deck: Deck) -> tuple[dict[int, int], list[str]]:
    """({slide number: choice index}, problems) from a link's ``answers`` value (``"4-0.7-2"``)."""
    answers: dict[int, int] = {}
    problems: list[str] = []
    for part in (text or "").split(".")[:100]:
        if not part:
            continue
        slide, _, choice = part.partition("-")
        choice = str(REVEALED) if choice == "r" else choice
        if not (slide.isdigit() and ((choice.isdigit() and int(choice) < MAX_CHOICES) or choice == str(REVEALED))):
            problems.append(f"“{part[:20]}” is not a slide number and a choice")
        elif not 1 <= int(slide) <= len(deck) or deck.slides[int(slide) - 1].question is None:
            problems.append(f"slide {int(slide)} asks no question")
        else:
            answers[int(slide)] = int(choice)
    return answers, problems


def write_answers(answers: Mapping[int, int]) -> str:
    """The link's ``answers`` value: the inverse of ``read_answers``."""
    return ".".join(f"{slide}-{'r' if choice == REVEALED else choice}" for slide, choice in sorted(answers.items()))


def questions(deck: Deck) -> list[int]:
    """The numbers of the slides that ask a question."""
    return [number for number, slide in enumerate(deck.slides, 1) if slide.question is not None]
