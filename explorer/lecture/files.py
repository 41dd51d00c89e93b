"""A lecture deck as one file to hand out: PDF (one A4 or Letter landscape page per slide, the views as vector
drawings), PPTX (one slide per slide, the views as pictures filling the slide's width, speaker notes in the notes)
or HTML (one offline page, the views interactive, arrow keys to move).

A slide with a question becomes two pages: the question and its choices (no view), then the view with the
answer. Each slide's view computes its result through the gateway (cached, as on the Lecture page) and is drawn
by the renderer worker at the size of its box on the page (``figure_look``: the slide's text sizes, larger on paper
so that every label prints at 9 pt or more); the worker then puts the pages together
(``explorer.render.deckfile``; its Chrome prints the PDF). So every native renderer and the file's assembly run
out of the caller's process:
one failure fails that export with a ``RenderFailed`` sentence naming the slide, never the server.

No Streamlit here: the Lecture page's button and ``explorer deck export`` both call ``export_deck``.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Callable, Iterable

from explorer.labels import visible
from explorer.lecture.deck import Deck, Slide
from explorer.render import export, renderer
from explorer.render.deckfile import FORMATS, PAPERS, SHEETS, Page, Sheet, page_fields, view_box
from explorer.render.export import HtmlFigure
from explorer.render.layout import PlotlySpec, labels_clear
from explorer.render.renderer import RenderFailed
from explorer.render.style import SLIDE, Look, short_model_name, slug

MIME = {
    "pdf": "application/pdf",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "html": "text/html",
}
# What each format takes of a view: a vector drawing, a picture at 2x, or the figure itself (drawn in the page).
DRAWN_AS = {"pdf": "svg", "pptx": "png", "html": None}
ASSEMBLY_TIMEOUT_S = renderer.DECK_TIMEOUT_S + 30  # the worker's own limit on printing, and its answer's way back

__all__ = [
    "FORMATS",
    "MIME",
    "PAPERS",
    "RenderFailed",
    "deck_file_name",
    "deck_models",
    "export_deck",
    "figure_look",
    "on_paper",
    "page_count",
]


def page_count(deck: Deck) -> int:
    """Pages (or slides) of the deck's file: one per slide, and one more for each question."""
    return len(deck) + sum(slide.question is not None for slide in deck.slides)


def deck_models(deck: Deck) -> tuple[str, ...]:
    """The models the deck's slides run, in the order they first appear."""
    return tuple(dict.fromkeys(slide.view.model for slide in deck.slides if getattr(slide.view, "model", None)))


def deck_file_name(deck: Deck, fmt: str, model_names: Iterable[str], today: datetime.date) -> str:
    """``generation-deck_prose-llama_2026-05-01.pdf``: the deck, the models it ran (short names, as exported
    figures name them) and the day, in file-name-safe words."""
    models = [slug(short_model_name(name)) for name in model_names]
    return "_".join([slug(f"{deck.name}-deck"), *(model for model in models if model), today.isoformat()]) + f".{fmt}"


def export_deck(
    deck: Deck, fmt: str, *, paper: str = "a4", progress: Callable[[int, int], None] | None = None
) -> bytes:
    """The whole deck as a ``fmt`` ("pdf", "pptx" or "html") file; ``progress(done, total)`` after each slide.
    ``paper``: the PDF's, "a4" or "letter" (landscape).

    ``RenderFailed`` when a slide's view cannot be drawn (the sentence names the slide) or the file cannot be
    put together; ``export.ExportUnavailable`` when this machine cannot draw the views at all."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown deck format {fmt!r}; choose one of {FORMATS}")
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; choose one of {PAPERS}")
    sheet = SHEETS[paper if fmt == "pdf" else "slide"]
    pages: list[Page] = []
    for number, slide in enumerate(deck.slides, 1):
        pages += slide_pages(deck, number, slide, fmt, first=len(pages) + 1, sheet=sheet)
        if progress is not None:
            progress(number, len(deck))
    sent = {"title": visible(deck.title), "pages": [page_fields(page) for page in pages], "paper": sheet.name}
    try:
        return renderer.pool().render("deck", sent, fmt, timeout=ASSEMBLY_TIMEOUT_S)
    except RenderFailed as error:
        raise RenderFailed(f"The {deck.title} deck could not be put together as {fmt.upper()}: {error}") from None


def slide_pages(
    deck: Deck, number: int, slide: Slide, fmt: str, *, first: int, sheet: Sheet = SHEETS["slide"]
) -> list[Page]:
    """The slide's page (its view), preceded by its question's page where it asks one; numbered from ``first``.
    In a PDF or PPTX (paper, or pictures) a line that asks to hover or click is left out (``on_paper``)."""
    result = slide.view.result()
    still = on_paper if DRAWN_AS[fmt] else str
    sources = (*slide.compared(result), *filter(None, [slide.ran_instead()]))
    title, notes = visible(slide.title), still(visible(slide.notes))
    look = (*slide.look, *slide.revealed(result))  # the view: after the answer
    view = Page(
        number=first,
        title=title,
        notes="\n\n".join([notes, *(visible(line) for line in sources)]),
        look=tuple(filter(None, (still(visible(line)) for line in look))),
        sources=tuple(visible(line) for line in sources),
    )
    pages = []
    if slide.question is not None:
        question = slide.question
        answer = still(visible(f"Answer: {question.answer(result)}. {question.explanation(result)}"))
        ask = Page(
            number=first,
            title=title,
            notes=f"{notes}\n\n{answer}",
            ask=visible(question.ask),
            choices=tuple(visible(choice) for choice in question.choices(result)),
        )
        pages, view = [ask], dataclasses.replace(view, number=first + 1, answer=answer)
    figure_at = figure_look(view, sheet) if DRAWN_AS[fmt] else SLIDE  # the HTML deck scales its slide-sized views
    try:
        figure = drawn(slide.view.figure(result)(look=figure_at), fmt, look=figure_at)
    except RenderFailed as error:
        raise RenderFailed(
            f"Slide {number} of the {deck.title} deck (“{slide.title}”) could not be drawn: {error}"
        ) from None
    return [*pages, dataclasses.replace(view, figure=figure)]


def figure_look(page: Page, sheet: Sheet) -> Look:
    """How ``page``'s view is drawn on ``sheet``: at its box's size (``view_box``, placed unscaled), its text at
    the slide's sizes (labels at projector size), larger where the paper needs it to print at 9 pt or more."""
    _, _, width, height = view_box(page, sheet)
    grow = max(sheet.smallest_text() - SLIDE.tick_size, 0)
    return dataclasses.replace(
        SLIDE,
        width=width,
        height=height,
        font_size=SLIDE.font_size + grow,
        tick_size=SLIDE.tick_size + grow,
        title_size=SLIDE.title_size + grow,
    )


# A sentence that asks the reader to point at something: nothing answers it on paper or in a picture.
_POINTING = re.compile(r"\b(hover\w*|click\w*|mouse|drag\w*|tap)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ASIDE = re.compile(r"\s*\([^()]*\)")


def on_paper(text: str) -> str:
    """``text`` without the sentences and asides (in brackets) that ask to hover, click or drag ("" when nothing
    else is left)."""
    text = _ASIDE.sub(lambda aside: "" if _POINTING.search(aside.group()) else aside.group(), text)
    paragraphs = text.split("\n")
    kept = [" ".join(s for s in _SENTENCE_END.split(p) if not _POINTING.search(s)) for p in paragraphs]
    return "\n".join(kept).strip()


def drawn(figure, fmt: str, look: Look = SLIDE):
    """The figure, drawn for ``look``, as ``fmt``'s file takes it: SVG or PNG bytes drawn by the worker, or for
    HTML its kind and spec (drawn by the page itself: plotly.js and Vega are inlined once for the whole deck).
    A Plotly figure's margins grow where its labels need them, and no text is smaller than the look's tick labels
    (``labels_clear``)."""
    if isinstance(figure, PlotlySpec):
        figure = figure.figure()
    plotly = hasattr(figure, "to_image")
    if plotly:
        figure = labels_clear(figure, smallest=look.tick_size)
    if DRAWN_AS[fmt] is not None:
        return export.export(figure, DRAWN_AS[fmt], size=(look.width, look.height))
    if isinstance(figure, HtmlFigure):
        return {"kind": "page", "spec": figure.html}
    if plotly:
        return {"kind": "plotly", "spec": figure.to_json(validate=False)}
    return {"kind": "vega-lite", "spec": figure.to_json(validate=False, indent=None)}
