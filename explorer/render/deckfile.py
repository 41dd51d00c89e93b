"""A lecture deck put together as one file (PDF, PPTX or offline HTML), inside the renderer worker.

The app's process has already drawn every slide's view through the worker (an SVG for the PDF, a 3840×2160 PNG
for the PPTX, the figure's spec for the HTML); it sends the pages as plain dicts (``Page``'s fields) and this
module makes the file. It imports nothing of the ``explorer`` package: the worker runs ``renderer.py`` as a
script (no torch), and finds this file beside it.

Every page is laid out on a canvas 1920 CSS pixels wide (a ``Sheet``: 1080 high for a slide, as high as the paper's
shape makes it for a handout), alike in the three formats: the slide's title on top, the view below it, and under
the view what to look at, the answer (on an answer page) and the sources' numbers beside the model's. A question
page holds the question and its choices, no view.

The view fills the width and the height the text leaves (``view_box``), and is drawn at exactly that box's size
(``explorer.lecture.files`` asks the view for a figure of that size), so it is never scaled on the page: its labels
keep the size they were laid out at, and never shrink below what a projector or paper needs.

- PDF: the pages as one HTML document, printed by the worker's Chrome (``renderer._print_pdf``) on A4 or Letter,
  landscape: the canvas scaled to the paper's width (``Sheet.zoom``), every text at least ``MIN_POINTS`` pt. Each
  view is its SVG export as an image, which Chrome prints as vector drawing (what the SVG export shows, exactly);
  titles and lines are text.
- PPTX: python-pptx, a 13.33×7.5 in slide per page, the view a picture at twice its box's pixels (labels at the
  projector size they were drawn at), the title in the slide's title placeholder, the slide number a PowerPoint
  field, the speaker notes in the notes page.
- HTML: one page, plotly.js and Vega inlined once, each view drawn interactively when its page is first shown.
"""

from __future__ import annotations

import base64
import copy
import html
import io
import math
import re
from dataclasses import dataclass

WIDTH, HEIGHT = 1920, 1080
SIZE = (WIDTH, HEIGHT)
MARGIN = 72
TITLE_SIZE, LOOK_SIZE, SOURCE_SIZE, NUMBER_SIZE = 48, 30, 24, 22
ASK_SIZE, CHOICE_SIZE = 44, 36
TITLE_BOTTOM = 120  # the view starts below the title band
LINE_HEIGHT = 1.3
INK, MUTED, ACCENT = "#1f2430", "#5b6170", "#0072B2"  # explorer.render.style's ink and muted, Okabe-Ito blue
FONT = '"Source Sans", "Source Sans Pro", "Helvetica Neue", "DejaVu Sans", Arial, sans-serif'  # style.FONT
CHOICES_PER_COLUMN = 6
HINT = "Predict first: the answer is on the next page."
PT_PER_PX = 0.75  # a CSS pixel is 1/96 in, a point 1/72 in
MIN_POINTS = 9  # the smallest text on paper, figures' included


@dataclass(frozen=True)
class Sheet:
    """What a page is laid out on: a canvas ``WIDTH`` CSS pixels wide and ``height`` high, printed on ``paper``
    (width, height in points, landscape) scaled by ``zoom``."""

    name: str
    paper: tuple[float, float]

    @property
    def zoom(self) -> float:
        return self.paper[0] / (WIDTH * PT_PER_PX)

    @property
    def height(self) -> int:
        # Rounded down, and a pixel less: Chrome rounds the paper's size (A4 prints 0.3 pt lower), and a canvas a
        # fraction taller than the page would spill a blank page after every page.
        return math.floor(self.paper[1] / (PT_PER_PX * self.zoom)) - 1

    def smallest_text(self) -> int:
        """Canvas pixels of the smallest text that prints at ``MIN_POINTS`` pt or more."""
        return math.ceil(MIN_POINTS / (PT_PER_PX * self.zoom) - 1e-9)


MM = 72 / 25.4  # points per millimetre
SHEETS = {
    "slide": Sheet("slide", (WIDTH * PT_PER_PX, HEIGHT * PT_PER_PX)),  # 13.33×7.5 in: PowerPoint's 16:9
    "a4": Sheet("a4", (297 * MM, 210 * MM)),
    "letter": Sheet("letter", (11 * 72, 8.5 * 72)),
}
PAPERS = ("a4", "letter")


@dataclass(frozen=True)
class Page:
    """One page of the file: a view page (``figure`` set) or a question page (``ask`` and ``choices`` set).

    figure   the view as the format needs it: SVG bytes (pdf), PNG bytes (pptx), {"kind", "spec"} (html)
    look     what to look at; ``answer`` the answer and why (an answer page); ``sources`` the sources' numbers
             beside the model's, and the line saying a bundled model ran in place of the source's
    """

    number: int
    title: str
    notes: str
    figure: object = None
    look: tuple[str, ...] = ()
    answer: str = ""
    sources: tuple[str, ...] = ()
    ask: str = ""
    choices: tuple[str, ...] = ()

    @property
    def is_question(self) -> bool:
        return self.figure is None


def page_fields(page: Page) -> dict:
    """A page as the plain dict the worker's pipe carries (the worker has no ``explorer`` package to unpickle
    classes from)."""
    return {name: getattr(page, name) for name in Page.__dataclass_fields__}


def pages_of(deck: dict) -> list[Page]:
    return [Page(**page) for page in deck["pages"]]


@dataclass(frozen=True)
class Line:
    text: str
    size: int
    color: str
    bold: bool = False
    kind: str = "look"  # its class in the HTML


def text_lines(page: Page) -> list[Line]:
    """The lines under the view, in order."""
    lines = [Line(f"• {text}", LOOK_SIZE, INK) for text in page.look]
    if page.answer:
        lines.append(Line(page.answer, LOOK_SIZE, ACCENT, bold=True, kind="answer"))
    return lines + [Line(text, SOURCE_SIZE, MUTED, kind="source") for text in page.sources]


CHAR_WIDTH = 0.6  # a generous average glyph width in ems (as explorer.render.style): rows are not undercounted
BOTTOM = 44  # the section's padding below the lines: the page number's band
VIEW_GAP = 12  # between the view and the lines under it


def rows(line: Line, width: float) -> int:
    """How many rows ``line`` takes in a box ``width`` wide, estimated."""
    return max(1, math.ceil(len(line.text) * CHAR_WIDTH * line.size / width))


def text_height(page: Page) -> float:
    """Canvas pixels the lines under the view take, estimated generously (they never spill off the page)."""
    return sum(rows(line, WIDTH - 2 * MARGIN) * line.size * LINE_HEIGHT for line in text_lines(page))


def view_box(page: Page, sheet: Sheet) -> tuple[int, int, int, int]:
    """(x, y, width, height) of the page's view on ``sheet``'s canvas: the whole width between the margins and
    the whole height between the title band and the lines under it (at least two fifths of the canvas)."""
    room = sheet.height - BOTTOM - text_height(page) - VIEW_GAP - TITLE_BOTTOM
    return (MARGIN, TITLE_BOTTOM, WIDTH - 2 * MARGIN, int(max(room, 0.4 * sheet.height)))


def sheet_of(deck: dict) -> Sheet:
    """The sheet a deck's pages are laid out on: its paper (a PDF), else a slide."""
    return SHEETS[deck.get("paper") or "slide"]


def assemble(fmt: str, deck: dict) -> bytes:
    """``deck`` ({"title", "pages": [Page fields]}) as a PPTX or HTML file (the PDF: ``printable``, then Chrome)."""
    return _ASSEMBLERS[fmt](deck["title"], pages_of(deck))


# --- HTML, for the PDF and the deck page ---------------------------------------------------------------------

# Without ligatures: the PDF's text reads "flies", not "ﬂies", when searched or copied.
_STYLE = f"""
html, body {{ margin: 0; background: #fff; }}
body {{ font-family: {FONT}; color: {INK}; font-variant-ligatures: no-common-ligatures; }}
section {{ position: relative; width: {WIDTH}px; height: {HEIGHT}px; padding: 28px {MARGIN}px 44px;
  box-sizing: border-box; display: flex; flex-direction: column; overflow: hidden; }}
h1 {{ font-size: {TITLE_SIZE}px; line-height: 1.2; margin: 0; height: {TITLE_BOTTOM - 28}px; }}
.view {{ flex: 1; position: relative; min-height: 0; margin-bottom: 12px; }}
.view > img {{ width: 100%; height: 100%; object-fit: contain; display: block; }}
.lines p {{ margin: 0; line-height: {LINE_HEIGHT}; }}
.look {{ font-size: {LOOK_SIZE}px; }}
.answer {{ font-size: {LOOK_SIZE}px; font-weight: bold; color: {ACCENT}; }}
.source {{ font-size: {SOURCE_SIZE}px; color: {MUTED}; }}
.ask {{ font-size: {ASK_SIZE}px; font-weight: bold; margin: 40px 0; line-height: 1.3; }}
.choices {{ font-size: {CHOICE_SIZE}px; list-style: upper-alpha; line-height: 1.6; margin: 0;
  column-count: var(--columns); }}
.hint {{ margin: auto 0 0; font-size: {SOURCE_SIZE}px; color: {MUTED}; }}
.number {{ position: absolute; right: {MARGIN}px; bottom: 18px; font-size: {NUMBER_SIZE}px; color: {MUTED}; }}
"""


def _print_style(sheet: Sheet) -> str:
    """Printed: one paper page per section, the canvas zoomed to the paper's width."""
    width, height = sheet.paper
    return (
        f"@page {{ size: {width:.2f}pt {height:.2f}pt; margin: 0; }} html {{ zoom: {sheet.zoom:.6f}; }}"
        f" section {{ height: {sheet.height}px; break-after: page; }}"
    )


def printable(deck: dict) -> str:
    """The deck as one HTML document, a page per section on the deck's paper, each view its SVG as an image at
    its own size (each SVG a document of its own, so the ids of two figures' clip paths never meet), for Chrome
    to print."""
    pages, sheet = pages_of(deck), sheet_of(deck)
    sections = "\n".join(_section(page, len(pages), _svg_image, sheet) for page in pages)
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(deck['title'])}</title>"
        f"<style>{_STYLE}{_print_style(sheet)}</style></head><body>{sections}</body></html>"
    )


def _svg_image(page: Page) -> str:
    source = "data:image/svg+xml;base64," + base64.b64encode(page.figure).decode()
    return f"<img alt='' src='{source}'>"


def _section(page: Page, total: int, figure, sheet: Sheet | None = None) -> str:
    """One page: ``figure(page)`` gives the view's markup, the view as high as ``view_box`` on ``sheet`` (the
    figure drawn at that size), or on the deck page as high as the lines leave."""
    title = f"<h1>{html.escape(page.title)}</h1>"
    number = f"<div class='number'>{page.number} / {total}</div>"
    if page.is_question:
        choices = "".join(f"<li>{html.escape(choice)}</li>" for choice in page.choices)
        columns = math.ceil(len(page.choices) / CHOICES_PER_COLUMN)
        return (
            f"<section class='question'>{title}<p class='ask'>{html.escape(page.ask)}</p>"
            f"<ol class='choices' style='--columns: {columns}'>{choices}</ol><p class='hint'>{HINT}</p>"
            f"{number}</section>"
        )
    lines = "".join(f"<p class='{line.kind}'>{html.escape(line.text)}</p>" for line in text_lines(page))
    size = "" if sheet is None else f" style='flex: none; height: {view_box(page, sheet)[3]}px'"
    view = f"<div class='view'{size}>{figure(page)}</div>"
    return f"<section>{title}{view}<div class='lines'>{lines}</div>{number}</section>"


# The deck as one page to present from: the 1920×1080 pages stacked on a stage scaled to the window, the page on
# show drawn the first time it is shown (a hidden Plotly figure has no size to draw at), its view at slide size
# scaled into its box (Plotly and Vega find their marks under a CSS transform: hover works).
_DECK_STYLE = """
html, body { height: 100%; overflow: hidden; }
#stage { position: absolute; width: 1920px; height: 1080px; transform-origin: 0 0; }
section { position: absolute; inset: 0; display: none; }
section.shown { display: flex; }
.view > .figure { position: absolute; width: 1920px; height: 1080px; transform-origin: 0 0; }
.view iframe { border: 0; width: 1920px; height: 1080px; }
"""

_SCRIPT = """
(function () {
  const stage = document.getElementById("stage");
  const pages = Array.from(document.querySelectorAll("section"));
  let shown = 0;
  function fitStage() {
    const scale = Math.min(window.innerWidth / 1920, window.innerHeight / 1080);
    stage.style.transform = "scale(" + scale + ")";
    stage.style.left = (window.innerWidth - 1920 * scale) / 2 + "px";
    stage.style.top = (window.innerHeight - 1080 * scale) / 2 + "px";
  }
  function fitView(page) {
    const view = page.querySelector(".view"), figure = view && view.querySelector(".figure");
    if (!figure) return;
    const scale = Math.min(view.clientWidth / 1920, view.clientHeight / 1080);
    figure.style.transform = "scale(" + scale + ")";
    figure.style.left = (view.clientWidth - 1920 * scale) / 2 + "px";
  }
  function draw(page) {
    const figure = page.querySelector(".figure");
    if (!figure || figure.dataset.drawn) return;
    figure.dataset.drawn = "1";
    const spec = page.querySelector("script.spec");
    if (figure.dataset.kind === "plotly") {
      const plotted = JSON.parse(spec.textContent);
      Plotly.newPlot(figure, plotted.data, plotted.layout, {displaylogo: false});
    } else if (figure.dataset.kind === "vega-lite") {
      vegaEmbed(figure, JSON.parse(spec.textContent), {renderer: "svg", actions: false});
    }
  }
  function show(index) {
    shown = Math.max(0, Math.min(pages.length - 1, index));
    pages.forEach((page, i) => page.classList.toggle("shown", i === shown));
    fitView(pages[shown]);
    draw(pages[shown]);
    history.replaceState(null, "", "#" + (shown + 1));
  }
  // A presenter's remote sends PageDown and PageUp; Space and Shift+Space as in every slide viewer.
  const MOVES = {ArrowRight: 1, ArrowDown: 1, PageDown: 1, " ": 1, Enter: 1, ArrowLeft: -1, ArrowUp: -1,
    PageUp: -1, Backspace: -1};
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Home") show(0);
    else if (event.key === "End") show(pages.length - 1);
    else if (event.key in MOVES) show(shown + (event.key === " " && event.shiftKey ? -1 : MOVES[event.key]));
    else return;
    event.preventDefault();
  });
  window.addEventListener("resize", () => { fitStage(); fitView(pages[shown]); });
  window.addEventListener("hashchange", () => show((parseInt(location.hash.slice(1), 10) || 1) - 1));
  document.addEventListener("DOMContentLoaded", () => {
    fitStage();
    show((parseInt(location.hash.slice(1), 10) || 1) - 1);
  });
})();
"""


def _json_text(text: str) -> str:
    """JSON safe inside a <script> element: a "<" can only stand in a JSON string, where "\\u003c" reads the same,
    so no "</script>" or "<!--" in a label ends or bends the element."""
    return text.replace("<", "\\u003c")


def _script_text(text: str) -> str:
    """JavaScript safe inside a <script> element: only "</script" ends it (plotly.js and the Vega bundle hold none
    today; in a string or a regular expression "<\\/script" reads the same)."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


def _live_figure(page: Page) -> str:
    kind, spec = page.figure["kind"], page.figure["spec"]
    if kind == "page":  # a whole page of its own (BertViz's views): its inlined scripts run in a frame
        return f"<div class='figure' data-kind='page'><iframe srcdoc='{html.escape(spec)}'></iframe></div>"
    return (
        f"<div class='figure' data-kind='{kind}'></div>"
        f"<script class='spec' type='application/json'>{_json_text(spec)}</script>"
    )


def _html(title: str, pages: list[Page]) -> bytes:
    kinds = {page.figure["kind"] for page in pages if not page.is_question}
    head = [f"<meta charset='utf-8'><title>{html.escape(title)}</title><style>{_STYLE}{_DECK_STYLE}</style>"]
    if "plotly" in kinds:  # once for the whole deck
        from plotly.offline import get_plotlyjs

        head.append(f"<script>{_script_text(get_plotlyjs())}</script>")
    if "vega-lite" in kinds:  # vegaEmbed, Vega-Lite and Vega bundled by vl-convert; a module keeps its names apart
        import vl_convert

        head.append(f"<script type='module'>{_script_text(vl_convert.javascript_bundle())}</script>")
    sections = "\n".join(_section(page, len(pages), _live_figure) for page in pages)
    return (
        f"<!DOCTYPE html><html lang='en'><head>{''.join(head)}</head><body><div id='stage'>{sections}</div>"
        f"<script>{_SCRIPT}</script></body></html>"
    ).encode()


# --- PPTX ----------------------------------------------------------------------------------------------------

EMU_PER_PX = 12192000 // WIDTH  # a 13.333 in wide slide: 6350 EMU (half a point) per CSS pixel
TITLE_ONLY = 5  # the default template's "Title Only" layout
SLIDE_NUMBER_FIELD = "{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}"  # the GUID PowerPoint's own templates give it


def _pptx(title: str, pages: list[Page]) -> bytes:
    from pptx import Presentation
    from pptx.util import Emu

    deck = Presentation()
    deck.slide_width, deck.slide_height = Emu(WIDTH * EMU_PER_PX), Emu(HEIGHT * EMU_PER_PX)
    deck.core_properties.title = title
    for page in pages:
        slide = deck.slides.add_slide(deck.slide_layouts[TITLE_ONLY])
        _pptx_title(slide, page)
        (_pptx_question if page.is_question else _pptx_view)(slide, page)
        _pptx_number(slide, page, len(pages))
        slide.notes_slide.notes_text_frame.text = page.notes
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _emu(px: float):
    from pptx.util import Emu

    return Emu(int(px * EMU_PER_PX))


def _pptx_title(slide, page: Page) -> None:
    """The slide's own title placeholder (what PowerPoint's outline and a screen reader read), moved to the top
    band (the layout keeps it where a 4:3 slide has it)."""
    from pptx.dml.color import RGBColor
    from pptx.enum.text import PP_ALIGN
    from pptx.util import Pt

    shape = slide.shapes.title
    shape.left, shape.top, shape.width, shape.height = (_emu(v) for v in (MARGIN, 20, WIDTH - 2 * MARGIN, 90))
    shape.text_frame.text = page.title
    paragraph = shape.text_frame.paragraphs[0]
    paragraph.alignment = PP_ALIGN.LEFT
    for run in paragraph.runs:
        run.font.size, run.font.bold = Pt(TITLE_SIZE / 2), True
        run.font.color.rgb = RGBColor.from_string(INK[1:])


def _pptx_view(slide, page: Page) -> None:
    x, y, width, height = view_box(page, SHEETS["slide"])
    slide.shapes.add_picture(io.BytesIO(page.figure), _emu(x), _emu(y), _emu(width), _emu(height))
    box = (MARGIN, y + height + VIEW_GAP, WIDTH - 2 * MARGIN, text_height(page))
    _pptx_box(slide, box, text_lines(page))


def _pptx_question(slide, page: Page) -> None:
    ask = Line(page.ask, ASK_SIZE, INK, bold=True)
    _pptx_box(slide, (MARGIN, TITLE_BOTTOM + 40, WIDTH - 2 * MARGIN, 2 * ASK_SIZE * LINE_HEIGHT), [ask])
    marked = [f"{chr(ord('A') + i)}.  {choice}" for i, choice in enumerate(page.choices)]
    columns = [marked[i : i + CHOICES_PER_COLUMN] for i in range(0, len(marked), CHOICES_PER_COLUMN)]
    column_width = (WIDTH - 2 * MARGIN) / len(columns)
    for i, column in enumerate(columns):
        box = (MARGIN + 40 + i * column_width, TITLE_BOTTOM + 260, column_width - 40, 600)
        _pptx_box(slide, box, [Line(choice, CHOICE_SIZE, INK) for choice in column])
    _pptx_box(
        slide,
        (MARGIN, HEIGHT - 18 - SOURCE_SIZE * 1.3, 1200, SOURCE_SIZE * 1.3),
        [Line(HINT.replace("page", "slide"), SOURCE_SIZE, MUTED)],
    )


def _pptx_number(slide, page: Page, total: int) -> None:
    """The page's number over the total ("3 / 22") at the bottom right, the 3 PowerPoint's slide-number field
    (it follows the slide when slides are moved, added or hidden), the total as written."""
    from pptx.oxml.ns import qn

    box = (WIDTH - MARGIN - 300, HEIGHT - 18 - NUMBER_SIZE * 1.3, 300, NUMBER_SIZE * 1.3)
    run = _pptx_box(slide, box, [Line(f" / {total}", NUMBER_SIZE, MUTED)], right=True)[0]
    field = run._r.makeelement(qn("a:fld"), {"id": SLIDE_NUMBER_FIELD, "type": "slidenum"})
    field.append(copy.deepcopy(run._r.get_or_add_rPr()))  # the run's size and colour
    number = field.makeelement(qn("a:t"), {})
    number.text = str(page.number)  # what a viewer that does not update fields shows
    field.append(number)
    run._r.addprevious(field)


def _pptx_box(slide, box: tuple[float, float, float, float], lines: list[Line], *, right: bool = False) -> list:
    """A text box at ``box`` (CSS pixels) holding one paragraph per line, wrapped by the viewer; its runs."""
    """A text box at ``box`` (CSS pixels) holding one paragraph per line, wrapped by the viewer."""
    from pptx.dml.color import RGBColor
    from pptx.enum.text import PP_ALIGN
    from pptx.util import Pt

    frame = slide.shapes.add_textbox(*(_emu(v) for v in box)).text_frame
    frame.word_wrap = True
    frame.margin_left = frame.margin_right = frame.margin_top = frame.margin_bottom = 0
    runs = []
    for i, line in enumerate(lines):
        paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        paragraph.alignment = PP_ALIGN.RIGHT if right else PP_ALIGN.LEFT
        run = paragraph.add_run()
        run.text = line.text
        run.font.size, run.font.bold = Pt(line.size / 2), line.bold  # a CSS pixel is half a point here
        run.font.color.rgb = RGBColor.from_string(line.color[1:])
        runs.append(run)
    return runs


_ASSEMBLERS = {"pptx": _pptx, "html": _html}
FORMATS = ("pdf", "pptx", "html")

__all__ = ["FORMATS", "PAPERS", "SHEETS", "SIZE", "Page", "Sheet", "assemble", "page_fields", "printable", "view_box"]
