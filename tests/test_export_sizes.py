"""Slide-sized exports (issue 26 §3): the *All heads* figure for every model shape, and BertViz's head and model
views, as PNG (3840×2160) and SVG (1920×1080) read back and checked for what they show; and a view drawn for a
lecture file's box (issue 38 §4) exported at exactly that box's size."""

from __future__ import annotations

import dataclasses
import io
import re
import warnings
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from PIL import Image

import explorer
from explorer.render import export
from explorer.render.bertviz import head_view_slide, model_view_slide
from explorer.render.grid import MAX_THUMBNAIL, heads_grid
from explorer.render.style import SLIDE, FigureInfo
from tests.exports import check_export, png_size

pytestmark = pytest.mark.skipif(export.image_export_problem() is not None, reason="no Chrome/Chromium here")

SHAPES = [(6, 12), (5, 6), (12, 12), (2, 4), (1, 1)]  # layers × heads: MiniLM, the bundled decoder, BERT-base...
SVG = "{http://www.w3.org/2000/svg}"
# d3.schemeCategory10: BertViz's colour for head i is HEAD_COLOURS[i % 10].
HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def _attention(layers: int, heads: int, tokens: int, *, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Random rows that sum to 1 over the keys each query may see ([layer, head, query, key], [layer, q, k])."""
    masks = np.tril(np.ones((tokens, tokens), bool)) if causal else np.ones((tokens, tokens), bool)
    masks = np.broadcast_to(masks, (layers, tokens, tokens))
    scores = np.random.default_rng(0).random((layers, heads, tokens, tokens))
    weights = np.where(masks[:, None], scores, 0.0)
    return (weights / weights.sum(-1, keepdims=True)).astype(np.float32), masks


def _offset(element, parents) -> tuple[float, float]:
    """The sum of the translate() transforms of ``element``'s ancestors (Plotly places plots that way)."""
    x = y = 0.0
    node = element
    while node in parents:
        node = parents[node]
        move = re.search(r"translate\(([-\d.]+)[ ,]*([-\d.]*)\)", node.get("transform", ""))
        if move:
            x, y = x + float(move[1]), y + float(move[2] or 0)
    return x, y


@pytest.mark.parametrize(("layers", "heads"), SHAPES, ids=[f"{lay}x{h}" for lay, h in SHAPES])
def test_all_heads_exports_a_slide_for_every_model_shape(layers, heads):
    weights, masks = _attention(layers, heads, 7, causal=False)
    info = FigureInfo("All heads", model="org/model", text="time flies", where=(f"{layers} layers × {heads} heads",))
    figure = heads_grid(weights, masks, info=info, look=SLIDE)
    assert png_size(export.export(figure, "png")) == (3840, 2160)
    svg = export.export(figure, "svg")
    check_export("svg", svg)
    root = ElementTree.fromstring(svg)
    parents = {child: parent for parent in root.iter() for child in parent}
    (tiles,) = [e for e in root.iter(f"{SVG}image") if parents[e].get("class", "").startswith("hm")]
    dx, dy = _offset(tiles, parents)
    left, top = dx + float(tiles.get("x")), dy + float(tiles.get("y"))
    width, height = float(tiles.get("width")), float(tiles.get("height"))
    # The whole grid inside the slide, below the title, with square cells (8 tiles' cells per thumbnail here).
    assert left >= 0 and left + width <= 1920 and top >= SLIDE.title_band and top + height <= 1080
    assert width / height == pytest.approx((heads * 8 - 1) / (layers * 8 - 1), rel=0.02)


def test_all_heads_of_a_long_causal_input_warns_nothing():
    """Pooled blocks wholly above the causal diagonal hold no weight: blank, without "Mean of empty slice"."""
    weights, masks = _attention(2, 2, 3 * MAX_THUMBNAIL, causal=True)
    info = FigureInfo("All heads", model="org/model", text="a long text")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = heads_grid(weights, masks, info=info, look=SLIDE)
    tiles = np.asarray(figure.data[0].z, dtype=float)
    assert np.isnan(tiles[0, MAX_THUMBNAIL - 1]) and np.isfinite(tiles[MAX_THUMBNAIL - 1, 0])


@pytest.fixture
def capture(minilm):
    return explorer.capture(minilm, "time flies like an arrow")


def _head_slide(capture, layer: int, head: int):
    info = FigureInfo("Head view", model="m", text="time flies like an arrow", where=(f"layer {layer}", f"head {head}"))
    return head_view_slide(capture, info=info, layers=[layer], heads=[head], layer=layer)


def _share_of(image: Image.Image, colour: str) -> float:
    """The share of the slide's pixels within a small distance of ``colour`` (a line's colour, any opacity
    above a third: blended with white, the hue keeps its channel order)."""
    pixels = np.asarray(image, dtype=np.int16)  # a quarter of the slide's resolution: lines stay 6 px thick
    target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return float((np.abs(pixels - target).max(-1) < 40).mean())


@pytest.mark.parametrize(("layer", "head"), [(2, 3), (4, 0)])
def test_the_head_view_png_shows_the_selected_heads_lines(capture, layer, head):
    data = export.export(_head_slide(capture, layer, head), "png")
    check_export("png", data)
    image = Image.open(io.BytesIO(data))
    assert image.size == (3840, 2160)
    image = image.convert("RGB").reduce(4)
    # Head 7's grey is left out: the black tokens' anti-aliased edges are grey too.
    others = [c for i, c in enumerate(HEAD_COLOURS) if i not in (head, 7)]
    # The selected head's lines (and its head box) are drawn in its colour; other heads show only their light
    # head boxes, nothing in their full colour beyond their box.
    assert _share_of(image, HEAD_COLOURS[head]) > 0.005
    assert max(_share_of(image, c) for c in others) < 0.002


def test_the_head_view_svg_holds_the_selected_heads_lines(capture):
    layer, head = 2, 3
    svg = export.export(_head_slide(capture, layer, head), "svg")
    check_export("svg", svg)
    root = ElementTree.fromstring(svg)
    lines = list(root.iter(f"{SVG}line"))
    weights = np.rint(capture.main.attentions[layer, head] * 255) / 255
    assert len(lines) == np.count_nonzero(weights)  # every line drawn, those of unselected heads left out
    for line in lines:
        style = dict(part.split(":", 1) for part in line.get("style").split(";"))
        assert style["stroke"] == "rgb(214, 39, 40)"  # head 3's colour, #d62728
        query, key = int(line.get("left-token-index")), int(line.get("right-token-index"))
        assert float(style["stroke-opacity"]) == pytest.approx(weights[query, key], abs=1e-3)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts.count("flies") == 2 and "Head view · layer 2 · head 3" in texts  # both token columns, the title


def test_the_model_view_exports_every_head(capture):
    info = FigureInfo("Model view", model="m", text="time flies like an arrow", where=("6 layers × 12 heads",))
    slide = model_view_slide(capture, info=info)
    check_export("png", export.export(slide, "png"))
    svg = export.export(slide, "svg")
    check_export("svg", svg)
    root = ElementTree.fromstring(svg)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert {str(h) for h in range(12)} <= set(texts) and "Model view · 6 layers × 12 heads" in texts
    assert len(list(root.iter(f"{SVG}line"))) > 6 * 12 * 7  # at least a line per query in every thumbnail
    page = export.export(slide, "html").decode()
    check_export("html", page.encode())


BOX = (1776, 700)  # a lecture slide's view box: the width between the margins, the height the text leaves


def test_a_view_drawn_for_a_box_exports_at_that_box_size(capture):
    """BertViz's page and a Vega-Lite chart take their canvas from ``size`` (a Plotly figure from its look): the
    file places them unscaled, so their labels keep the size they were laid out at."""
    import altair as alt

    look = dataclasses.replace(SLIDE, width=BOX[0], height=BOX[1])
    info = FigureInfo("Head view", model="m", text="time flies like an arrow", where=("layer 2", "head 3"))
    page = head_view_slide(capture, info=info, look=look, layers=[2], heads=[3], layer=2)
    chart = alt.Chart(alt.Data(values=[{"x": 1}, {"x": 2}])).mark_bar().encode(x="x:Q").properties(width=1600)
    for figure in (page, chart):
        root = ElementTree.fromstring(export.export(figure, "svg", size=BOX))
        assert (root.get("width"), root.get("height")) == tuple(str(side) for side in BOX)
    assert png_size(export.export(page, "png", size=BOX)) == (2 * BOX[0], 2 * BOX[1])
    texts = [t.text for t in ElementTree.fromstring(export.export(page, "svg", size=BOX)).iter(f"{SVG}text")]
    assert texts.count("flies") == 2  # the view is drawn, not an empty canvas
