"""A lecture deck as one file to hand out: PDF (one 16:9 page per slide, the views as vector drawings), PPTX (one
slide per slide, the views as 3840×2160 pictures, speaker notes in the notes) or HTML (one offline page, the views
interactive, arrow keys to move).

A slide with a question becomes two pages: the question and its choices (no view), then the view with the
answer. Each slide's view computes its result through the gateway (cached, as on the Lecture page) and is drawn
at slide size (``style.SLIDE``) by the renderer worker; the worker then puts the pages together
(``explorer.render.deckfile``; its Chrome prints the PDF). So every native renderer and the file's assembly run
out of the caller's process:
one failure fails that export with a ``RenderFailed`` sentence naming the slide, never the server.

No Streamlit here: the Lecture page's button and ``explorer deck export`` both call ``export_deck``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable

from explorer.labels import visible
from explorer.lecture.deck import Deck, Slide
from explorer.render import export, renderer
from explorer.render.deckfile import FORMATS, Page, page_fields
from explorer.render.export import HtmlFigure
from explorer.render.layout import PlotlySpec
from explorer.render.renderer import RenderFailed
from explorer.render.style import SLIDE, short_model_name, slug

MIME = {
    "pdf": "application/pdf",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "html": "text/html",
}
# What each format takes of a view: a vector drawing, a picture at 2x, or the figure itself (drawn in the page).
DRAWN_AS = {"pdf": "svg", "pptx": "png", "html": None}
ASSEMBLY_TIMEOUT_S = renderer.DECK_TIMEOUT_S + 30  # the worker's own limit on printing, and its answer's way back

__all__ = ["FORMATS", "MIME", "RenderFailed", "deck_file_name", "deck_models", "export_deck", "page_count"]


def page_count(deck: Deck) -> int:
    """Pages (or slides) of the deck's file: one per slide, and one more for each question."""
    return len(deck) + sum(slide.question is not None for slide in deck.slides)


def deck_models(deck: Deck) -> tuple[str, ...]:
    """The models the deck's slides run, in the order they first appear."""
    return tuple(dict.fromkeys(slide.view.model for slide in deck.slides if getattr(slide.view, "model", None)))


def deck_file_name(deck: Deck, fmt: str, model_names: Iterable[str], today: datetime.date) -> str:
    """``generation-deck_prose-gpt2_2026-05-01.pdf``: the deck, the models it ran (short names, as exported
    figures name them) and the day, in file-name-safe words."""
    models = [slug(short_model_name(name)) for name in model_names]
    return "_".join([slug(f"{deck.name}-deck"), *(model for model in models if model), today.isoformat()]) + f".{fmt}"


def export_deck(deck: Deck, fmt: str, *, progress: Callable[[int, int], None] | None = None) -> bytes:
    """The whole deck as a ``fmt`` ("pdf", "pptx" or "html") file; ``progress(done, total)`` after each slide.

    ``RenderFailed`` when a slide's view cannot be drawn (the sentence names the slide) or the file cannot be
    put together; ``export.ExportUnavailable`` when this machine cannot draw the views at all."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown deck format {fmt!r}; choose one of {FORMATS}")
    pages: list[Page] = []
    for number, slide in enumerate(deck.slides, 1):
        pages += slide_pages(deck, number, slide, fmt, first=len(pages) + 1)
        if progress is not None:
            progress(number, len(deck))
    sent = {"title": visible(deck.title), "pages": [page_fields(page) for page in pages]}
    try:
        return renderer.pool().render("deck", sent, fmt, timeout=ASSEMBLY_TIMEOUT_S)
    except RenderFailed as error:
        raise RenderFailed(f"The {deck.title} deck could not be put together as {fmt.upper()}: {error}") from None


def slide_pages(deck: Deck, number: int, slide: Slide, fmt: str, *, first: int) -> list[Page]:
    """The slide's page (its view), preceded by its question's page where it asks one; numbered from ``first``."""
    result = slide.view.result()
    try:
        figure = drawn(slide.view.figure(result)(look=SLIDE), fmt)
    except RenderFailed as error:
        raise RenderFailed(
            f"Slide {number} of the {deck.title} deck (“{slide.title}”) could not be drawn: {error}"
        ) from None
    sources = (*slide.compared(result), *filter(None, [slide.ran_instead()]))
    title, notes = visible(slide.title), visible(slide.notes)
    view = Page(
        number=first,
        title=title,
        notes="\n\n".join([notes, *(visible(line) for line in sources)]),
        figure=figure,
        look=tuple(visible(line) for line in slide.look),
        sources=tuple(visible(line) for line in sources),
    )
    if slide.question is None:
        return [view]
    question = slide.question
    answer = visible(f"Answer: {question.answer(result)}. {question.why}")
    ask = Page(
        number=first,
        title=title,
        notes=f"{notes}\n\n{answer}",
        ask=visible(question.ask),
        choices=tuple(visible(choice) for choice in question.choices(result)),
    )
    return [ask, Page(**{**page_fields(view), "number": first + 1, "answer": answer})]


def drawn(figure, fmt: str):
    """The figure as ``fmt``'s file takes it: SVG or PNG bytes drawn by the worker, or for HTML its kind and spec
    (drawn by the page itself: plotly.js and Vega are inlined once for the whole deck)."""
    if DRAWN_AS[fmt] is not None:
        return export.export(figure, DRAWN_AS[fmt])
    if isinstance(figure, HtmlFigure):
        return {"kind": "page", "spec": figure.html}
    if isinstance(figure, PlotlySpec):
        figure = figure.figure()
    if hasattr(figure, "to_image"):  # a Plotly figure
        return {"kind": "plotly", "spec": figure.to_json(validate=False)}
    return {"kind": "vega-lite", "spec": figure.to_json(validate=False, indent=None)}
