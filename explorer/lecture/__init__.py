"""The lecture decks: the two chapters (transformer anatomy, text generation) and the lecture as slides, each slide
one live view of the app with the sources' numbers beside the model's, and predict-then-reveal questions.

- ``deck``: what a deck is (``Deck``, ``Slide``, ``Question``).
- ``anatomy`` and ``generation``: the two decks' slides.

No Streamlit here: the Lecture page shows a slide through ``explorer.ui``, a notebook or an export through the
slide's view.
"""

from explorer.lecture.anatomy import ANATOMY
from explorer.lecture.deck import Deck, Question, Slide
from explorer.lecture.generation import GENERATION

DECKS = {deck.name: deck for deck in (ANATOMY, GENERATION)}

__all__ = ["ANATOMY", "DECKS", "GENERATION", "Deck", "Question", "Slide"]
