"""Figure conventions: names that never collide, colours that survive greyscale, labels that never overlap,
and exports at slide size in every format."""

from __future__ import annotations

import io
import itertools
import re
import xml.etree.ElementTree as ElementTree

import altair as alt
import numpy as np
import pytest

from explorer.render import export
from explorer.render.heatmap import matrix_geometry, token_matrix
from explorer.render.style import (
    LINE_HEIGHT,
    SEQUENTIAL,
    SLIDE,
    FigureInfo,
    finish_altair,
    presentation_look,
    screen_look,
    slug,
    snippet,
    text_width,
    token_ticks,
)

INFO = FigureInfo(
    "Attention weights",
    model="sentence-transformers/all-MiniLM-L6-v2",
    text="time flies like an arrow",
    where=("layer 3", "head 7"),
)


def test_titles_and_file_names_say_what_the_figure_shows():
    assert INFO.title() == "Attention weights · layer 3 · head 7"
    assert INFO.subtitle() == "all-MiniLM-L6-v2 · “time flies like an arrow”"
    stem = INFO.file_stem()
    assert stem.startswith("attention-weights_all-minilm-l6-v2_time-flies-like-an-arrow_layer-3_head-7_")
    assert re.fullmatch(r"[a-z0-9_-]+", stem)


def test_exports_of_different_inputs_never_collide():
    long_a = "the same first forty characters of a text, then one ending"
    long_b = "the same first forty characters of a text, then another"
    stems = {
        INFO.file_stem(),
        FigureInfo("Attention weights", model="gpt2", text=INFO.text, where=INFO.where).file_stem(),
        FigureInfo("Attention weights", model=INFO.model, text=long_a, where=INFO.where).file_stem(),
        FigureInfo("Attention weights", model=INFO.model, text=long_b, where=INFO.where).file_stem(),
        FigureInfo("Attention weights", model=INFO.model, text=INFO.text, where=("layer 3", "head 8")).file_stem(),
    }
    assert len(stems) == 5


def test_names_are_safe_for_any_text():
    assert slug("Ünïcödé / ../../etc <script>") == "unicode-etc-script"
    assert snippet("a  very\nlong text " * 10, 20).endswith("…") and len(snippet("x " * 50, 20)) <= 21
    assert FigureInfo("View", text="…").file_stem()  # never empty


def _luminance(hex_colour: str) -> float:
    """WCAG relative luminance."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_the_sequential_scale_survives_greyscale():
    luminances = [_luminance(colour) for _, colour in SEQUENTIAL]
    assert all(a > b for a, b in itertools.pairwise(luminances))
    assert luminances[0] > 0.8 and luminances[-1] < 0.05  # light to nearly black: the full range of grey


def _spans(count: int, cell: float, ticks, size: int) -> list[tuple[float, float]]:
    """Where each shown label sits along its axis (centre ± half its extent along the axis)."""
    half = LINE_HEIGHT * size / 2
    return [((i + 0.5) * cell - half, (i + 0.5) * cell + half) for i in ticks.positions]


@pytest.mark.parametrize("count", [5, 12, 40, 128, 512])
@pytest.mark.parametrize("look", [screen_look(820, 380), screen_look(1460, 640), presentation_look(1200, 480), SLIDE])
def test_token_labels_never_overlap(count, look):
    tokens = [f"token{i}" for i in range(count)]
    geometry = matrix_geometry(tokens, tokens, look)
    for ticks, horizontal in ((geometry.x_ticks, True), (geometry.y_ticks, False)):
        if horizontal and ticks.angle == 0:
            widths = [text_width(t, look.tick_size) for t in ticks.text]
            pitch = geometry.cell * ticks.step
            assert max(widths) <= pitch
        else:
            spans = _spans(count, geometry.cell, ticks, look.tick_size)
            assert all(a[1] <= b[0] + 1e-6 for a, b in itertools.pairwise(spans))
    x0, x1 = geometry.x_domain
    assert 0 <= x0 < x1 <= 1 and 0 <= geometry.y_domain[0] < geometry.y_domain[1] <= 1


def test_token_ticks_turn_before_thinning():
    assert token_ticks(["a", "b"], 200, 16, horizontal_axis=True).angle == 0
    assert token_ticks(["a long token"] * 3, 30, 16, horizontal_axis=True).angle == -45
    upright = token_ticks([f"t{i}" for i in range(100)], 8, 16, horizontal_axis=True)
    assert upright.angle == -90 and upright.step == 3 and upright.text[1] == "#3 t3"


def test_presentation_figures_are_16_by_9_with_projector_text():
    for width, room in ((1200, 480), (1820, 840), (1280, None)):
        look = presentation_look(width, room)
        assert abs(look.width / look.height - 16 / 9) < 0.01
        assert look.tick_size >= 16
        if room:
            assert look.height <= room
    assert presentation_look(1820, 850).tick_size >= 19  # grows with a 1920×1080 screen
    # Half the window (Compare's two sides) with room below: taller than 16:9, up to square.
    assert (presentation_look(552, 600).width, presentation_look(552, 600).height) == (560, 560)
    assert (presentation_look(860, 960).width, presentation_look(860, 960).height) == (860, 860)


def _figure():
    tokens = [f"tok{i}" for i in range(40)]
    values = np.random.default_rng(0).random((40, 40))
    return token_matrix(values, tokens, tokens, info=INFO, look=SLIDE)


@pytest.mark.skipif(export.image_export_problem() is not None, reason="no Chrome/Chromium for kaleido here")
def test_png_export_is_the_slide_at_twice_its_size():
    from PIL import Image

    image = Image.open(io.BytesIO(export.export(_figure(), "png")))
    assert image.format == "PNG" and image.size == (3840, 2160)


@pytest.mark.skipif(export.image_export_problem() is not None, reason="no Chrome/Chromium for kaleido here")
def test_svg_export_parses_and_is_slide_sized():
    root = ElementTree.fromstring(export.export(_figure(), "svg"))
    assert root.tag.endswith("svg")
    assert (root.get("width"), root.get("height")) == ("1920", "1080")
    assert "tok0" in ElementTree.tostring(root, encoding="unicode")  # the labels are text, not pixels


def test_html_export_is_standalone():
    page = export.export(_figure(), "html", title=INFO.title()).decode()
    assert "<title>Attention weights · layer 3 · head 7</title>" in page
    assert not re.search(r"<script[^>]+src=", page)  # plotly.js is inlined, nothing is fetched
    assert len(page) > 3_000_000  # plotly.js itself


def test_altair_exports_need_no_browser():
    data = alt.Data(values=[{"token": "a", "p": 0.7}, {"token": "b", "p": 0.3}])
    chart = finish_altair(alt.Chart(data).mark_bar().encode(x="token:N", y="p:Q"), INFO, SLIDE)
    assert chart.to_dict()["title"]["text"] == INFO.title()
    assert export.export(chart, "png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert ElementTree.fromstring(export.export(chart, "svg")).tag.endswith("svg")
    page = export.export(chart, "html").decode()
    assert not re.search(r"<script[^>]+src=", page)


def test_a_notebook_saves_figures_named_after_what_they_show(tmp_path, minilm):
    import explorer
    from explorer.render import SLIDE, FigureInfo, attention_heatmap, save

    capture = explorer.capture(minilm, "time flies like an arrow")
    info = FigureInfo("Attention weights", model=minilm.name, text="time flies like an arrow", where=("layer 2",))
    figure = attention_heatmap(capture.main, 2, 5, info=info, look=SLIDE)
    path = save(figure, info, "html", tmp_path)
    assert path.name == f"{info.file_stem()}.html" and path.stat().st_size > 3_000_000
    assert (figure.layout.width, figure.layout.height) == (1920, 1080)
