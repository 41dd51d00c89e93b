"""The lecture decks as files (issue 28 §4): the PDF, PPTX and HTML opened and read back (pypdf, python-pptx, the
HTML's text and a real Chromium), on the real decks and the bundled models, offline.

Each file is made once for the module (a whole deck takes seconds: every slide's view drawn by the renderer
worker) and many things are asserted on it. Both decks are checked as PDF (A4) and HTML, the anatomy deck on Letter
too; the PPTX is the generation deck's (its pictures come through the same worker drawings as the PDF's, PNG
instead of SVG). Handouts (issue 38 §4): every text of a PDF page, the figures' own included, prints at 9 pt or
more, each view fills its page's width, no two labels of a view's drawing overlap, nothing on paper asks to hover;
a PPTX picture fills the slide's width at the size its labels were drawn for, its slide number a field.
"""

from __future__ import annotations

import datetime
import html
import io
import math
import re

import pytest

import explorer
from explorer import cli, views
from explorer.labels import visible
from explorer.lecture import ANATOMY, DECKS, GENERATION
from explorer.lecture import files as deck_files
from explorer.render import deckfile, renderer
from explorer.render.renderer import RenderFailed
from tests import drawn
from tests.browser import browser_test, open_tab

pytestmark = pytest.mark.slow  # a whole program or export per test: the full loop only (docs/contributing.md)

PATH_OPERATORS = {b"m", b"l", b"c", b"v", b"y", b"re", b"h"}


class Made(dict):
    """(deck, format[, paper]) -> (the file, the progress reported while it was made), each made when first asked
    for (a PDF on A4 unless a paper is named); ``figures[key]``: each view as the file took it (SVG, PNG)."""

    def __init__(self):
        super().__init__()
        self.figures = {}

    def __missing__(self, key):
        name, fmt, *paper = key
        calls, figures = [], []
        real = deck_files.drawn

        def recording(figure, fmt, look):
            figures.append(real(figure, fmt, look))
            return figures[-1]

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(deck_files, "drawn", recording)
            data = deck_files.export_deck(
                DECKS[name], fmt, paper=(*paper, "a4")[0], progress=lambda done, total: calls.append((done, total))
            )
        self[key], self.figures[key] = (data, calls), figures
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


def pdf(made, name, paper="a4"):
    from pypdf import PdfReader

    return PdfReader(io.BytesIO(made[pdf_key(name, paper)][0]))


def pdf_key(name, paper):
    return (name, "pdf") if paper == "a4" else (name, "pdf", paper)


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
def test_the_pdf_has_an_a4_page_per_slide_with_its_title_and_lines_as_text(made, name):
    deck = DECKS[name]
    reader = pdf(made, name)
    assert len(reader.pages) == deck_files.page_count(deck)
    answers = results(deck)
    for number, (page, (kind, slide)) in enumerate(zip(reader.pages, expected(deck), strict=True), 1):
        width, height = float(page.mediabox.width), float(page.mediabox.height)
        assert (width, height) == pytest.approx((841.89, 595.28), abs=0.4)  # A4 landscape, 297×210 mm
        text = flat(page.extract_text())
        assert flat(visible(slide.title)) in text and f"{number}/{len(reader.pages)}" in text, (number, text)
        if kind == "question":
            assert flat(slide.question.ask) in text
            assert all(flat(choice) in text for choice in slide.question.choices(answers[id(slide)]))
            assert "Answer:" not in text  # the answer comes on the next page
        else:
            assert all(flat(deck_files.on_paper(line)) in text for line in slide.look)
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


IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _then(first, second):
    """The PDF matrix (a, b, c, d, e, f) that applies ``first``, then ``second``."""
    a, b, c, d, e, f = first
    a2, b2, c2, d2, e2, f2 = second
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


PAINT = {b"S", b"s", b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*"}  # what draws a path (``n`` only clips with it)


def printed(page, reader) -> tuple[list[float], list[list[tuple[float, float]]]]:
    """The page as printed: the size in points of every text it shows, and the corners (on the page) of every path
    it paints and image it draws, its form XObjects' included."""
    sizes, shapes = [], []
    _walk(page.get_contents(), page["/Resources"], reader, IDENTITY, sizes, shapes)
    return sizes, shapes


def _walk(content, resources, reader, ctm, sizes, shapes) -> None:
    from pypdf.generic import ContentStream

    saved, tm, size, points = [], IDENTITY, 0.0, []
    for operands, operator in ContentStream(content, reader).operations:
        numbers = [float(o) for o in operands if isinstance(o, int | float)]
        if operator == b"q":
            saved.append((ctm, size))
        elif operator == b"Q":
            ctm, size = saved.pop()
        elif operator == b"cm":
            ctm = _then(tuple(numbers), ctm)
        elif operator == b"BT":
            tm = IDENTITY
        elif operator == b"Tm":
            tm = tuple(numbers)
        elif operator == b"Tf":
            size = float(operands[1])
        elif operator in (b"Tj", b"TJ", b"'", b'"'):
            a, b, c, d, _, _ = _then(tm, ctm)
            sizes.append(size * math.sqrt(abs(a * d - b * c)))
        elif operator in (b"m", b"l", b"c", b"v", b"y"):
            corners = list(zip(numbers[::2], numbers[1::2], strict=True))
            points += [_on_page(x, y, ctm) for x, y in corners]
        elif operator == b"re":
            x, y, w, h = numbers
            points += [_on_page(x + dx, y + dy, ctm) for dx in (0, w) for dy in (0, h)]
        elif operator in PAINT or operator == b"n":
            shapes += [points] if operator in PAINT else []
            points = []
        elif operator == b"Do":
            drawn_object = resources["/XObject"][operands[0]].get_object()
            if drawn_object["/Subtype"] == "/Form":
                inner = _then(tuple(float(v) for v in drawn_object.get("/Matrix", IDENTITY)), ctm)
                _walk(drawn_object, drawn_object.get("/Resources", resources), reader, inner, sizes, shapes)
            else:  # an image fills the unit square
                shapes.append([_on_page(x, y, ctm) for x in (0, 1) for y in (0, 1)])


def _extent(points) -> tuple[float, float, float, float]:
    xs, ys = [x for x, _ in points], [y for _, y in points]
    return min(xs), min(ys), max(xs), max(ys)


def _on_page(x, y, ctm) -> tuple[float, float]:
    a, b, c, d, e, f = ctm
    return (a * x + c * y + e, b * x + d * y + f)


PAPER_CASES = [("anatomy", "a4"), ("generation", "a4"), ("anatomy", "letter")]


@pytest.mark.parametrize(("name", "paper"), PAPER_CASES, ids=[f"{n}-{p}" for n, p in PAPER_CASES])
def test_every_text_on_paper_prints_at_9_points_or_more_and_each_view_fills_its_page(made, name, paper):
    """Issue 38 §4: the figures' tick labels, legends and cell numbers as much as the page's own lines."""
    deck, reader = DECKS[name], pdf(made, name, paper)
    width, height = deckfile.SHEETS[paper].paper
    for number, (page, (kind, slide)) in enumerate(zip(reader.pages, expected(deck), strict=True), 1):
        # The paper's size to a tenth of a millimetre (Chrome rounds it).
        assert (float(page.mediabox.width), float(page.mediabox.height)) == pytest.approx((width, height), abs=0.4)
        sizes, shapes = printed(page, reader)
        assert len(sizes) >= 3 and min(sizes) >= 9 - 1e-3, (number, slide.title, sorted(sizes)[:5])
        if kind == "question":
            continue
        # What the view draws (its canvas' background included), the page's own background left out.
        boxes = [_extent(shape) for shape in shapes]
        view = [(left, bottom, right, top) for left, bottom, right, top in boxes if right - left < 0.99 * width]
        left, bottom = min(box[0] for box in view), min(box[1] for box in view)
        right, top = max(box[2] for box in view), max(box[3] for box in view)
        assert right - left >= 0.9 * width and top - bottom >= 0.5 * height, (number, slide.title)


@browser_test
@pytest.mark.parametrize(("name", "paper"), PAPER_CASES, ids=[f"{n}-{p}" for n, p in PAPER_CASES])
def test_no_two_labels_of_a_handouts_view_overlap(made, browser, name, paper):
    """Each view's SVG, as the PDF prints it, laid out by Chromium: every label inside the drawing and apart from
    the others (issue 38 §4: "dimension" over tick labels, "residual stream" over layer labels, a legend run
    together)."""
    made[pdf_key(name, paper)]
    figures = made.figures[pdf_key(name, paper)]
    titles = [visible(slide.title) for slide in DECKS[name].slides]
    tab = open_tab(browser, width=1920, height=1500)
    faults = {}
    for title, svg in zip(titles, figures, strict=True):
        tab.page.set_content(f"<!DOCTYPE html><html><body style='margin: 0'>{svg.decode()}</body></html>")
        texts = drawn.text_boxes(tab.page, "body > svg")
        try:
            drawn.assert_inside(texts, drawn.box(tab.page, "body > svg"))
            drawn.assert_apart(texts)
        except AssertionError as fault:
            faults[title] = str(fault)
    assert faults == {}
    assert tab.errors == [] and tab.external == []
    tab.context.close()


def test_nothing_on_paper_asks_to_hover_or_click(made):
    pages = [page.extract_text() for name in ("anatomy", "generation") for page in pdf(made, name).pages]
    assert [text for text in pages if POINTING.search(text)] == []
    from pptx import Presentation

    presentation = Presentation(io.BytesIO(made[GENERATION.name, "pptx"][0]))
    shapes = [shape for slide in presentation.slides for shape in slide.shapes if shape.has_text_frame]
    assert [shape.text_frame.text for shape in shapes if POINTING.search(shape.text_frame.text)] == []


POINTING = re.compile(r"\b(hover|click|drag)", re.IGNORECASE)


def test_on_paper_leaves_out_the_sentences_that_ask_to_point():
    assert deck_files.on_paper("Hover a token to see where it looks.") == ""
    two = "Two sentences in one input. Hover a token to see where it looks. Each reads itself."
    assert deck_files.on_paper(two) == "Two sentences in one input. Each reads itself."
    assert deck_files.on_paper("The bars (hover one for its value) sum to 2.41.") == "The bars sum to 2.41."
    kept = "Layer 0 (the first) shows the mask: 1 where a token may look."
    assert deck_files.on_paper(kept) == kept
    assert deck_files.on_paper("Click a cell.\n\nThe diagonal is 1.") == "The diagonal is 1."


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
        (picture,) = pictures
        # The picture fills the slide's width (it was 8 to 10 of 13.3 inches), drawn at twice its own size in
        # slide pixels: its labels show at the size they were laid out at, the projector's (20 px of 1920).
        assert picture.width >= 0.9 * presentation.slide_width, (number, picture.width / presentation.slide_width)
        px = deckfile.EMU_PER_PX
        assert picture.image.size == (round(2 * picture.width / px), round(2 * picture.height / px)), number
        assert picture.left >= 0 and picture.left + picture.width <= presentation.slide_width
        assert shown.shapes.title.top + shown.shapes.title.height <= picture.top  # the title is not drawn over
        texts = [shape for shape in shown.shapes if shape.has_text_frame and shape.top > picture.top]
        assert all(shape.top >= picture.top + picture.height for shape in texts), number  # nor the view
        assert all(line in notes for line in slide.compared(result))


def test_the_pptx_numbers_each_slide_with_powerpoints_slide_number_field(made):
    from lxml import etree
    from pptx import Presentation

    presentation = Presentation(io.BytesIO(made[GENERATION.name, "pptx"][0]))
    total = len(presentation.slides)
    for number, shown in enumerate(presentation.slides, 1):
        xml = etree.tostring(shown.shapes._spTree, encoding="unicode")
        fields = re.findall(r'<a:fld [^>]*type="slidenum"[^>]*>.*?<a:t>(\d+)</a:t></a:fld>', xml)
        assert fields == [str(number)], number
        assert any(shape.text_frame.text == f"{number} / {total}" for shape in shown.shapes if shape.has_text_frame)


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
def test_the_html_deck_moves_with_the_keyboard_and_draws_each_view_offline(made, browser, name, tmp_path):
    deck = DECKS[name]
    path = tmp_path / f"{name}.html"
    path.write_bytes(made[name, "html"][0])
    titles = [visible(slide.title) for _, slide in expected(deck)]
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
        figure = page.locator("section.shown .figure svg, section.shown .figure iframe").first
        if page.locator("section.shown .figure").count():
            figure.wait_for(timeout=20_000)
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
    tab.context.close()


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
    assert deck_files.deck_file_name(GENERATION, "pdf", deck_files.deck_models(GENERATION), day) == (
        "generation-deck_prose-llama_2026-05-01.pdf"
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
