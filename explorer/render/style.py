"""Figure conventions, in one place: every figure of the explorer is finished here.

A view's render function draws the data; ``finish`` then gives it the house look: its size, fonts,
colours, margins, and a title and subtitle that say what it shows. Exports use the same function at
slide size, so a screenshot, a PNG and an HTML file all read alike.

Two small values carry the conventions:

- ``FigureInfo`` says what a figure shows (the view, the model, the text, and where: layer, head,
  step). It makes the title, the subtitle and a file name that never collides with another export.
- ``Look`` says how big the figure is and how large its text is: ``screen_look`` for a browser
  window, ``presentation_look`` for a projector, ``SLIDE`` for a 1920×1080 export.

Colours: ``SEQUENTIAL`` is a single-hue blue scale whose lightness falls steadily from the lightest to
the darkest colour, so it survives greyscale printing and every kind of colour blindness.
``CATEGORICAL`` is the Okabe–Ito palette for categories (beams, statuses, segments).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import math
import re
import unicodedata
from dataclasses import dataclass, replace

from explorer.labels import visible
from explorer.render.layout import relayout

FONT = '"Source Sans", "Source Sans Pro", "Helvetica Neue", "DejaVu Sans", Arial, sans-serif'
INK = "#1f2430"  # text
MUTED = "#5b6170"  # secondary text, subtitles
GRID = "#e3e6ec"

# Light to dark; relative luminance strictly decreases along it (tests check it), so order survives greyscale.
SEQUENTIAL = [
    [0.0, "#eaf0f8"],
    [0.125, "#d4e3f3"],
    [0.25, "#b9d3ea"],
    [0.375, "#93bfdf"],
    [0.5, "#6aa7d3"],
    [0.625, "#468cc4"],
    [0.75, "#2a6fb0"],
    [0.875, "#14528f"],
    [1.0, "#08306b"],
]
# Okabe & Ito (2008): distinguishable with every common colour-vision deficiency.
CATEGORICAL = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
# Text written in a cell: black or white, whichever contrasts more with the cell. Either reaches WCAG AA's 4.5:1
# on any colour (at worst 4.58:1, where both are equal); Plotly's own choice (#444 or white, by a brightness
# threshold) left mid-blue cells at 3.6:1.
CELL_TEXT_DARK, CELL_TEXT_LIGHT = "#000000", "#ffffff"


def luminance(colour: str) -> float:
    """WCAG 2.1's relative luminance of a ``#rrggbb`` colour."""
    channels = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2.1's contrast ratio of two colours, from 1 to 21."""
    low, high = sorted((luminance(first), luminance(second)))
    return (high + 0.05) / (low + 0.05)


def cell_text_colour(fill: str) -> str:
    """The colour of text written on ``fill``: black or white, whichever contrasts more."""
    dark, light = contrast_ratio(fill, CELL_TEXT_DARK), contrast_ratio(fill, CELL_TEXT_LIGHT)
    return CELL_TEXT_DARK if dark >= light else CELL_TEXT_LIGHT


def scale_colour(colorscale, fraction: float) -> str:
    """The colour of ``colorscale`` ([[position, "#rrggbb"], ...]) at ``fraction`` (0 to 1), interpolated in RGB
    as Plotly draws it."""
    fraction = min(max(fraction, 0.0), 1.0)
    for (left, low), (right, high) in itertools.pairwise(colorscale):
        if fraction <= right:
            t = 0.0 if right == left else (fraction - left) / (right - left)
            rgb = [round((1 - t) * int(low[i : i + 2], 16) + t * int(high[i : i + 2], 16)) for i in (1, 3, 5)]
            return "#" + "".join(f"{c:02x}" for c in rgb)
    return colorscale[-1][1]


def cell_text_colours(values, zmin: float, zmax: float, colorscale=None) -> list[list[str]]:
    """For every cell of a heatmap of ``values`` [row, column] (NaN: no cell), its text's colour (see
    ``cell_text_colour``) on the cell's colour of ``colorscale`` between ``zmin`` and ``zmax``."""
    colorscale = colorscale or SEQUENTIAL
    span = (zmax - zmin) or 1.0
    return [
        [cell_text_colour(scale_colour(colorscale, (v - zmin) / span)) if math.isfinite(v) else "" for v in row]
        for row in values.tolist()
    ]


def in_colour(text: str, colour: str) -> str:
    """``text`` (Plotly label markup, ``<br>`` included: Plotly carries the span's style onto every line) drawn
    in ``colour``: how a heatmap whose ``text`` holds labels gives each cell its own text colour (its
    ``textfont.color`` is one colour for all cells)."""
    return f'<span style="color:{colour}">{text}</span>'


# BertViz's heads and layers: its own d3 category10 first (the colours its users know), then the dark shades of d3's
# category20b/c, so that the 12 heads of a BERT-base or MiniLM layer, and up to 20, each have a colour of their own.
HEAD_COLOURS = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363",
]  # fmt: skip

# Slides are 16:9; exports are drawn at 1920×1080 (PNG at twice that, for sharp projection).
SLIDE_WIDTH, SLIDE_HEIGHT = 1920, 1080
ASPECT = SLIDE_WIDTH / SLIDE_HEIGHT
TITLE_CHARS = 120  # longer titles are cut (with an ellipsis)
MAX_LABEL_CHARS = 12  # longer token labels are abbreviated on axes (hover shows them whole)
CHAR_WIDTH = 0.6  # a conservative average glyph width, in ems, for sans-serif labels
LINE_HEIGHT = 1.3  # ems between two horizontal labels so that they never touch


@dataclass(frozen=True)
class Look:
    """How big a figure is drawn (pixels) and how large its text is."""

    width: int
    height: int
    font_size: int = 14
    tick_size: int = 14
    title_size: int = 18
    presentation: bool = False

    @property
    def subtitle_size(self) -> int:
        return max(self.font_size - 1, 11)

    def smaller_ticks(self, by: int) -> int:
        """A secondary axis's tick size: ``by`` px smaller on a screen, never below the ticks on a projector."""
        return self.tick_size if self.presentation else self.tick_size - by

    @property
    def cell_text_size(self) -> int:
        """Numbers and words written inside cells and beside markers: as large as the ticks on a projector."""
        return self.tick_size if self.presentation else max(self.tick_size - 3, 10)

    @property
    def title_band(self) -> int:
        """Pixels above the plot taken by the title and subtitle (fitted to where Plotly draws them), plus a gap."""
        return int(self.title_size * 1.5 + self.subtitle_size * 1.75 + 8 + 14)


SCREEN = Look(1100, 720)
SLIDE = Look(SLIDE_WIDTH, SLIDE_HEIGHT, font_size=22, tick_size=20, title_size=30, presentation=True)
MIN_HEIGHT = 380  # the smallest figure drawn, however little room the window leaves
ROOMY = 520  # a window with less room than this below a figure's top gets a larger figure and scrolls


def screen_look(width: int | None = None, height: int | None = None) -> Look:
    """A figure as wide as the page's content and, where the window allows, no taller than what is left of it.

    ``width`` is the content width, ``height`` the room between the figure's top and the window's bottom
    (both in CSS pixels; None when the browser has not said yet).
    """
    width = int(min(max(width or SCREEN.width, 480), 1600))
    # Too little room left in the window (a small screen): draw a readable figure and let the page scroll.
    tallest = int(height) if height and height >= ROOMY else min(width * 0.75, SCREEN.height)
    return Look(width, int(min(tallest, width * 0.9, 1000)))


def presentation_look(width: int | None = None, height: int | None = None, *, wide: bool = False) -> Look:
    """A 16:9 figure that fits the room left in the window, with projector-sized text.

    A figure in a narrow column (two side by side) may grow taller than 16:9, up to square, where the window
    has the room. Tick labels are at least 16 px, and grow with the figure (20 px on a 1920×1080 screen).
    ``wide``: the whole content width, wider than 16:9 where the room is lower than that.
    """
    width = int(width or SCREEN.width)
    room = max(height, MIN_HEIGHT * 0.8) if height else None
    if room and not wide:
        width = int(min(width, room * ASPECT))
    width = max(width, 560)
    if room and wide:
        height = int(min(room, width / ASPECT))
    else:
        height = int(max(min(room, width), width / ASPECT)) if room else int(width / ASPECT)
    # A wide figure is lower than a 16:9 one in the same window (a slide's text takes some height): its text is
    # sized a little larger for its height, to stay at 20 px on a 1920×1080 projector.
    tick = max(16, round(height / (40 if wide else 44)))
    return Look(width, height, font_size=tick + 2, tick_size=tick, title_size=tick + 8, presentation=True)


def look_for(
    width: int | None, height: int | None, *, presentation: bool, tall: bool = False, wide: bool = False
) -> Look:
    """``wide``: on a projector, as wide as the content even where that is wider than 16:9 (a lecture slide,
    whose title and text take some of the window's height)."""
    look = presentation_look(width, height, wide=wide) if presentation else screen_look(width, height)
    return taller(look, height) if tall else look


TALLEST = 1.35  # a square matrix under its title, above its key labels and a colour bar: height per width


def taller(look: Look, room: int | None) -> Look:
    """``look`` for a square matrix in a narrow column (two side by side): as tall as the column's width lets the
    matrix be, within the window's room where the figure fits the window (on a projector, or in a tall window)."""
    height = int(min(look.width * TALLEST, 1000))
    fitted = room and (look.presentation or room >= ROOMY)
    height = max(look.height, min(height, int(room)) if fitted else height)
    return replace(look, height=height)


@dataclass(frozen=True)
class FigureInfo:
    """What a figure shows: its view, the model, the text, and where in the model (layer, head, step).

    ``where`` items are short phrases such as ``"layer 3"``, ``"head 7"`` or ``"step 4"``.
    """

    view: str
    model: str = ""
    text: str = ""
    where: tuple[str, ...] = ()

    def title(self) -> str:
        # Capped: a title as long as a paragraph (a long label in ``where``) would shrink a slide's chart to
        # fit it (Vega sizes a chart by its content).
        title = visible(" · ".join((self.view, *self.where)))
        return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"

    def subtitle(self) -> str:
        # The model name and text come from visitors: shown with visible stand-ins for control characters.
        parts = [short_model_name(self.model)] if self.model else []
        if self.text.strip():
            parts.append(f"“{snippet(self.text)}”")
        return visible(" · ".join(parts))

    def file_stem(self) -> str:
        """A file name (no extension) naming the view, model, text and place; a hash of the full text and
        model keeps exports of different inputs apart even when their snippets agree."""
        digest = hashlib.sha1(f"{self.model}\n{self.text}".encode("utf-8", "surrogatepass")).hexdigest()[:6]
        parts = [self.view, short_model_name(self.model), snippet(self.text, 32), *self.where]
        stem = "_".join(slug(part) for part in parts if slug(part))
        return f"{stem}_{digest}" if stem else digest


def short_model_name(name: str) -> str:
    """``sentence-transformers/all-MiniLM-L6-v2`` -> ``all-MiniLM-L6-v2``; folders keep their last part."""
    return re.split(r"[\\/]", name.rstrip("/\\"))[-1] if name else ""


def snippet(text: str, limit: int = 40) -> str:
    """The text on one line, cut at a word boundary near ``limit`` characters, with an ellipsis if cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0] if " " in flat[:limit] else flat[:limit]
    return cut.rstrip(" ,.;:") + "…"


def slug(text: str, limit: int = 48) -> str:
    """Lower-case ASCII words joined by hyphens: safe in file names on every system."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:limit].rstrip("-")


def escape(text: str) -> str:
    """Escape what Plotly's label renderer would read as markup (it decodes the entities back), with visible
    stand-ins for characters no renderer should be handed (``explorer.labels.visible``)."""
    return html.escape(visible(text), quote=False)


def abbreviate(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    label = visible(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


def text_width(text: str, size: float) -> float:
    """Estimated width in pixels of ``text`` at font ``size``: generous, so that estimates never undershoot."""
    return len(text) * CHAR_WIDTH * size


def finish(figure, info: FigureInfo, look: Look):
    """Apply the house look to a Plotly figure in place and return it: size, fonts, title, background.

    Margins and axis geometry are the render function's business (it knows its axes); this sets what
    every figure shares.
    """
    relayout(
        figure,
        template="none",  # the default template adds ~7 kB and a grey background
        width=look.width,
        height=look.height,
        font={"family": FONT, "size": look.font_size, "color": INK},
        paper_bgcolor="white",
        plot_bgcolor="white",
        title={
            "text": escape(info.title()),
            "subtitle": {"text": escape(info.subtitle()), "font": {"size": look.subtitle_size, "color": MUTED}},
            "x": 0.015,
            "xanchor": "left",
            "y": 1.0,
            "yanchor": "top",
            "yref": "container",
            "pad": {"t": 8},
            "font": {"size": look.title_size},
        },
        hoverlabel={"bgcolor": "white", "font": {"family": FONT, "size": max(look.font_size - 1, 12)}},
        meta={"file_stem": info.file_stem()},
        # Text is never read as a number when Plotly picks an axis type: tokens such as "1811" or "#1 3" on
        # a linear axis moved cells and bars to wrong rows (issue 38).
        autotypenumbers="strict",
    )
    return figure


def finish_altair(chart, info: FigureInfo, look: Look):
    """The same conventions for an Altair chart: title and subtitle, fonts, and the overall size."""
    return altair_look(chart.properties(**altair_title(info, look)), look)


def altair_title(info: FigureInfo, look: Look) -> dict:
    """The top-level ``title`` and ``usermeta`` of a chart that shows ``info``, as Vega-Lite spec entries."""
    title = {
        "text": info.title(),
        "anchor": "start",
        "fontSize": look.title_size,
        "subtitleFontSize": look.subtitle_size,
        "subtitleColor": MUTED,
        "color": INK,
        "font": FONT,
        "subtitleFont": FONT,
    }
    if info.subtitle():
        title["subtitle"] = info.subtitle()
    return {"title": title, "usermeta": {"file_stem": info.file_stem()}}


def altair_look(chart, look: Look):
    """The house fonts, colours and frame of an Altair chart, at ``look``'s sizes."""
    return (
        chart.configure(font=FONT, background="white")
        .configure_axis(
            labelFontSize=look.tick_size,
            titleFontSize=look.font_size,
            labelColor=INK,
            titleColor=INK,
            gridColor=GRID,
            labelFont=FONT,
            titleFont=FONT,
        )
        .configure_legend(labelFontSize=look.tick_size, titleFontSize=look.font_size)
        .configure_view(stroke=None)
    )


@dataclass(frozen=True)
class TokenTicks:
    """Which token labels an axis shows, at what angle, and the room they take beside the plot."""

    positions: tuple[int, ...]  # indices of the labelled tokens
    text: tuple[str, ...]  # their (escaped, abbreviated) labels
    angle: int  # 0, -45 or -90 degrees
    extent: int  # pixels the labels need outside the plot (below it for x, left of it for y)

    @property
    def step(self) -> int:
        return self.positions[1] - self.positions[0] if len(self.positions) > 1 else 1


def token_ticks(
    tokens, cell: float, size: int, *, horizontal_axis: bool, max_chars: int = MAX_LABEL_CHARS
) -> TokenTicks:
    """Labels for a token axis whose cells are ``cell`` pixels apart, so that no two labels overlap.

    A y axis writes labels across, so each needs one line height of cell. An x axis tries labels
    across, then at 45°, then upright, and thins them (every 2nd, 3rd... token, each marked with
    its position) only when even upright labels do not fit.
    """
    labels = [abbreviate(str(token), max_chars) for token in tokens]
    widest = max((text_width(label, size) for label in labels), default=0.0)
    line = LINE_HEIGHT * size
    if not horizontal_axis:
        step = max(1, math.ceil(line / max(cell, 1e-6)))
        return _ticks(labels, step, 0, lambda shown: max(text_width(s, size) for s in shown) + 8)
    if cell >= widest + size * 0.6:
        return _ticks(labels, 1, 0, lambda shown: line + 6)
    if cell * math.sin(math.pi / 4) >= line:
        return _ticks(labels, 1, -45, lambda shown: max(text_width(s, size) for s in shown) * 0.72 + size + 6)
    step = max(1, math.ceil(line / max(cell, 1e-6)))
    return _ticks(labels, step, -90, lambda shown: max(text_width(s, size) for s in shown) + 8)


def _ticks(labels: list[str], step: int, angle: int, extent_of) -> TokenTicks:
    positions = tuple(range(0, len(labels), step))
    shown = [labels[i] if step == 1 else f"#{i} {labels[i]}" for i in positions]
    extent = int(extent_of(shown)) if shown else 0
    return TokenTicks(positions, tuple(escape(s) for s in shown), angle, extent)
