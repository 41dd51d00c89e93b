"""The lecture decks as files (issue 28 §4): the PDF, PPTX and HTML opened and read back (pypdf, python-pptx, the
HTML's text and a real Chromium), on the real decks and the bundled models, offline.

Each file is made once for the module (a whole deck takes seconds: every slide's view drawn by the renderer
worker) and many things are asserted on it. Both decks are checked as PDF and HTML; the PPTX is the generation
deck's (its pictures come through the same worker drawings as the PDF's, PNG instead of SVG).
"""

from __future__ import annotations

import datetime
import html
import io
import re

import pytest

import explorer
from explorer import cli, views
from explorer.labels import visible
from explorer.lecture import ANATOMY, DECKS, GENERATION
from explorer.lecture import files as deck_files
from explorer.render import deckfile, renderer
from explorer.render.renderer import RenderFailed
from tests.browser import browser_test, chromium, open_tab

pytestmark = pytest.mark.slow  # a whole program or export per test: the full loop only (docs/contributing.md)

PATH_OPERATORS = {b"m", b"l", b"c", b"v", b"y", b"re", b"h"}


class Made(dict):
    """(deck, format) -> (the file, the progress reported while it was made), each made when first asked for."""

    def __missing__(self, key):
        name, fmt = key
        calls = []
        data = deck_files.export_deck(DECKS[name], fmt, progress=lambda done, total: calls.append((done, total)))
        self[key] = (data, calls)
        return self[key]


@pytest.fixture(scope="module")
def made():
    return Made()


def expected(deck) -> list[tuple[str, object]]:
    """(what the page is, its slide) for every page, in order: a question slide is its question, then its view."""
    pages = []
    for slide in deck.slides:
        if slide.question is not None:
            pages.append(("question", slide))
        pages.append(("answer" if slide.question else "view", slide))
    return pages


def flat(text: str) -> str:
    return "".join(text.split())


def results(deck) -> dict:
    return {id(slide): slide.view.result() for slide in deck.slides}  # cached by the gateway: no new model runs


def test_one_page_per_slide_and_one_more_per_question():
    for deck in DECKS.values():
        questions = sum(slide.question is not None for slide in deck.slides)
        assert deck_files.page_count(deck) == len(deck) + questions == len(expected(deck))
        assert questions >= 1


@pytest.mark.parametrize("fmt", deckfile.FORMATS)
def test_progress_is_reported_after_each_slide(made, fmt):
    name = "generation"
    assert made[name, fmt][1] == [(done, len(DECKS[name])) for done in range(1, len(DECKS[name]) + 1)]


# --- PDF -------------------------------------------------------------------------------------------------------


def pdf(made, name):
    from pypdf import PdfReader

    return PdfReader(io.BytesIO(made[name, "pdf"][0]))


def drawing_operators(page, reader) -> list[bytes]:
    """Every operator the page draws with, its form XObjects' included."""
    from pypdf.generic import ContentStream

    operators = [operator for _, operator in ContentStream(page.get_contents(), reader).operations]
    forms = page.get("/Resources", {}).get_object().get("/XObject", {})
    for form in forms.get_object().values() if forms else ():
        form = form.get_object()
        if form.get("/Subtype") == "/Form":
            operators += [operator for _, operator in ContentStream(form, reader).operations]
    return operators


@pytest.mark.parametrize("name", ["anatomy", "generation"])
def test_the_pdf_has_a_16_9_page_per_slide_with_its_title_and_lines_as_text(made, name):
    deck = DECKS[name]
    reader = pdf(made, name)
    assert len(reader.pages) == deck_files.page_count(deck)
    answers = results(deck)
    for number, (page, (kind, slide)) in enumerate(zip(reader.pages, expected(deck), strict=True), 1):
        width, height = float(page.mediabox.width), float(page.mediabox.height)
        assert (width, height) == (1440, 810)  # 1920×1080 CSS pixels, 16:9
        text = flat(page.extract_text())
        assert flat(visible(slide.title)) in text and f"{number}/{len(reader.pages)}" in text, (number, text)
        if kind == "question":
            assert flat(slide.question.ask) in text
            assert all(flat(choice) in text for choice in slide.question.choices(answers[id(slide)]))
            assert "Answer:" not in text  # the answer comes on the next page
        else:
            assert all(flat(line) in text for line in slide.look)
            assert all(flat(line) in text for line in slide.compared(answers[id(slide)])), number
        if kind == "answer":
            assert flat(f"Answer: {slide.question.answer(answers[id(slide)])}.") in text


@pytest.mark.parametrize("name", ["anatomy", "generation"])
def test_the_pdf_draws_the_views_as_vector_drawings(made, name):
    deck = DECKS[name]
    reader = pdf(made, name)
    for number, (page, (kind, slide)) in enumerate(zip(reader.pages, expected(deck), strict=True), 1):
        operators = drawing_operators(page, reader)
        paths = sum(operator in PATH_OPERATORS for operator in operators)
        if kind == "question":
            assert not page.images, number
            continue
        # A picture of the slide would be one slide-shaped image, no paths and no text: the view's axes, marks
        # and grid are paths (Plotly draws a heatmap's cells as an image of its own), its labels text.
        assert paths >= 5, (number, slide.title, paths)
        assert operators.count(b"Tj") + operators.count(b"TJ") >= 10, number
        sizes = [image.image.size for image in page.images]
        assert not [(w, h) for w, h in sizes if w >= 1440 and abs(w / h - 16 / 9) < 0.02], (number, sizes)
    # A Plotly chart without a heatmap (which Plotly itself draws as an image) holds no image at all.
    number = next(i for i, (kind, slide) in enumerate(expected(deck), 1) if kind != "question" and _barred(slide))
    assert len(reader.pages[number - 1].images) == 0, number


def _barred(slide) -> bool:
    return isinstance(slide.view, views.decoding.Comparison | views.anatomy.Parameters)


# --- PPTX ------------------------------------------------------------------------------------------------------


def test_the_pptx_has_a_16_9_slide_per_slide_with_title_picture_and_notes(made):
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    deck = GENERATION
    presentation = Presentation(io.BytesIO(made[deck.name, "pptx"][0]))
    assert len(presentation.slides) == deck_files.page_count(deck)
    assert presentation.slide_width * 9 == presentation.slide_height * 16
    answers = results(deck)
    for number, (shown, (kind, slide)) in enumerate(zip(presentation.slides, expected(deck), strict=True), 1):
        assert shown.shapes.title.text == visible(slide.title)
        pictures = [shape for shape in shown.shapes if shape.shape_type == MSO_SHAPE_TYPE.PICTURE]
        notes = shown.notes_slide.notes_text_frame.text
        assert notes.startswith(slide.notes), number
        result = answers[id(slide)]
        if kind == "question":
            assert pictures == []
            texts = " ".join(shape.text_frame.text for shape in shown.shapes if shape.has_text_frame)
            assert slide.question.ask in texts
            assert all(choice in texts for choice in slide.question.choices(result))
            assert slide.question.answer(result) in notes  # the teacher sees the answer in the notes
            continue
        assert [picture.image.size for picture in pictures] == [(3840, 2160)]
        picture = pictures[0]
        assert picture.width * 9 == pytest.approx(picture.height * 16, rel=1e-3)
        assert picture.left >= 0 and picture.left + picture.width <= presentation.slide_width
        assert shown.shapes.title.top + shown.shapes.title.height <= picture.top  # the title is not drawn over
        assert all(line in notes for line in slide.compared(result))


# --- HTML ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["anatomy", "generation"])
def test_the_html_is_one_offline_page_with_every_slide(made, name):
    from plotly.offline import get_plotlyjs

    deck = DECKS[name]
    page = made[name, "html"][0].decode()
    assert page.count("<section") == deck_files.page_count(deck)
    assert all(html.escape(visible(slide.title)) in page for slide in deck.slides)
    assert not re.search(r"""src\s*=\s*["']?https?:""", page)  # nothing loaded from the internet
    assert not re.search(r"<script\b[^>]*\bsrc\s*=", page)  # every script inlined
    assert not re.search(r"<link\b", page)
    assert page.count(get_plotlyjs()[:200]) == 1  # plotly.js once for the whole deck, not once per slide
    assert "keydown" in page and all(key in page for key in ("ArrowRight", "PageDown", "PageUp", "Home", "End"))


def test_the_html_keeps_labels_inside_their_script_and_shows_titles_literally():
    spec = '{"data": [{"type": "bar", "x": ["</script><script>alert(1)</script>"]}], "layout": {}}'
    page = deckfile.Page(number=1, title="<b>not bold</b>", notes="", figure={"kind": "plotly", "spec": spec})
    made = deckfile.assemble("html", {"title": "t", "pages": [deckfile.page_fields(page)]}).decode()
    assert "alert(1)</script>" not in made and "<b>not bold</b>" not in made
    assert "&lt;b&gt;not bold&lt;/b&gt;" in made
    assert made.count("<script") - made.count("<script class='spec'") == 2  # plotly.js and the deck's own


@browser_test
@pytest.mark.parametrize("name", ["anatomy", "generation"])
def test_the_html_deck_moves_with_the_keyboard_and_draws_each_view_offline(made, name, tmp_path):
    deck = DECKS[name]
    path = tmp_path / f"{name}.html"
    path.write_bytes(made[name, "html"][0])
    titles = [visible(slide.title) for _, slide in expected(deck)]
    with chromium() as browser:
        tab = open_tab(browser, width=1280, height=720)
        page = tab.page
        page.goto(path.as_uri())

        def shown() -> tuple[str, str]:
            return page.locator("section.shown h1").text_content(), page.locator("section.shown .number").text_content()

        assert shown() == (titles[0], f"1 / {len(titles)}")
        for number in range(2, len(titles) + 1):
            page.keyboard.press("PageDown" if number % 2 else "ArrowRight")
            assert shown() == (titles[number - 1], f"{number} / {len(titles)}")
            # the view on show is drawn (Plotly's or Vega's SVG, or BertViz's frame), scaled into the window
            drawn = page.locator("section.shown .figure svg, section.shown .figure iframe").first
            if page.locator("section.shown .figure").count():
                drawn.wait_for(timeout=20_000)
                box = page.locator("section.shown .view").bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= 1280 and box["y"] + box["height"] <= 720
        page.keyboard.press("End")
        assert shown()[0] == titles[-1]
        page.keyboard.press("Home")
        assert shown()[0] == titles[0]
        page.keyboard.press("End")
        page.keyboard.press("PageUp")
        assert shown()[0] == titles[-2]
        page.goto(f"{path.as_uri()}#3")  # a page's address opens that page
        page.reload()
        assert shown()[0] == titles[2]
        assert tab.external == [] and tab.errors == []


# --- failures, names, the command --------------------------------------------------------------------------


class FailingPool:
    """Draws nothing (an empty SVG) and fails the ``failing``-th request, as a renderer that died would."""

    def __init__(self, failing: int | None = None, kind: str | None = None):
        self.failing, self.kind, self.requests = failing, kind, 0

    def render(self, kind, spec, fmt, scale=1, size=None, *, timeout=None):
        self.requests += 1
        if self.requests == self.failing or kind == self.kind:
            raise RenderFailed("The renderer stopped while drawing this figure; the next export starts a new one.")
        return b"<svg xmlns='http://www.w3.org/2000/svg'/>"


def test_a_slide_that_cannot_be_drawn_fails_the_export_with_a_sentence_naming_it(monkeypatch):
    monkeypatch.setattr(deck_files.export, "image_export_problem", lambda: None)
    failing = FailingPool(failing=3)  # slide 3 is the third drawing
    monkeypatch.setattr(renderer, "pool", lambda: failing)
    slide = GENERATION.slide(3)
    with pytest.raises(RenderFailed, match=f"Slide 3 of the Text generation deck \\(“{slide.title}”\\)") as failed:
        deck_files.export_deck(GENERATION, "pdf")
    assert "renderer stopped" in str(failed.value)


def test_a_deck_that_cannot_be_put_together_fails_with_a_sentence(monkeypatch):
    failing = FailingPool(kind="deck")
    monkeypatch.setattr(renderer, "pool", lambda: failing)
    with pytest.raises(RenderFailed, match="The Text generation deck could not be put together as HTML"):
        deck_files.export_deck(GENERATION, "html")


def test_the_file_is_put_together_in_the_worker_process_not_the_callers(made, monkeypatch):
    def here(fmt, deck):
        raise AssertionError("put together in the caller's process")

    monkeypatch.setattr(deckfile, "assemble", here)
    monkeypatch.setattr(deckfile, "printable", here)
    made["generation", "html"]  # the deck's results computed and cached here
    assert deck_files.export_deck(GENERATION, "html").startswith(b"<!DOCTYPE html>")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown deck format 'key'"):
        deck_files.export_deck(GENERATION, "key")


def test_the_file_is_named_after_the_deck_its_models_and_the_day():
    day = datetime.date(2026, 5, 1)
    assert deck_files.deck_models(GENERATION) == (explorer.DEFAULT_DECODER,)
    assert deck_files.deck_file_name(GENERATION, "pdf", ["bundled/prose-gpt2"], day) == (
        "generation-deck_prose-gpt2_2026-05-01.pdf"
    )
    two = deck_files.deck_file_name(ANATOMY, "pptx", ["sentence-transformers/all-MiniLM-L6-v2", "Ω/dates t5"], day)
    assert two == "anatomy-deck_all-minilm-l6-v2_dates-t5_2026-05-01.pptx"


def test_the_command_writes_the_file_and_prints_its_path(made, tmp_path, capsys):
    output = tmp_path / "deck.html"
    assert cli.main(["deck", "export", "--deck", "generation", "--format", "html", "--output", str(output)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(output)
    assert f"slide {len(GENERATION)} of {len(GENERATION)}" in err
    assert output.read_bytes().startswith(b"<!DOCTYPE html>")
    assert output.read_bytes().count(b"<section") == deck_files.page_count(GENERATION)
