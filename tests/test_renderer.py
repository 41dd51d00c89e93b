"""The renderer worker: a native renderer that aborts or hangs fails one export and never the caller's process."""

import json
import xml.etree.ElementTree as ElementTree

import pytest

from explorer.render.renderer import RendererPool, RenderFailed, on_canvas
from tests.exports import check_export

pytestmark = pytest.mark.slow  # worker processes started, aborted and replaced: the full loop only

# vl-convert panics on a non-XML character in a label, inside a function that cannot unwind: in-process, this
# aborts Python (issue 18); in the worker it ends the worker only.
ABORTING_SPEC = json.dumps(
    {
        "data": {"values": [{"x": "a\x17b", "y": 1}]},
        "mark": "bar",
        "encoding": {"x": {"field": "x", "type": "nominal"}, "y": {"field": "y", "type": "quantitative"}},
    }
)
GOOD_SPEC = ABORTING_SPEC.replace("\\u0017", "-")


@pytest.fixture
def pool():
    instance = RendererPool(1)
    yield instance
    instance.close()


def test_a_renderer_that_aborts_fails_that_export_only(pool):
    with pytest.raises(RenderFailed, match="stopped"):
        pool.render("vega-lite", ABORTING_SPEC, "png", 2, size=(1920, 1080))
    check_export("png", pool.render("vega-lite", GOOD_SPEC, "png", 2, size=(1920, 1080)))
    with pytest.raises(RenderFailed, match="stopped"):
        pool.render("vega-lite", ABORTING_SPEC, "svg", 1, size=(1920, 1080))
    check_export("svg", pool.render("vega-lite", GOOD_SPEC, "svg", 1, size=(1920, 1080)))


def test_a_renderer_that_overruns_is_stopped_and_replaced(pool):
    pool.timeout = 0.001
    with pytest.raises(RenderFailed, match="longer than"):
        pool.render("vega-lite", GOOD_SPEC, "svg", 1, size=(1920, 1080))
    pool.timeout = 30
    check_export("svg", pool.render("vega-lite", GOOD_SPEC, "svg", 1, size=(1920, 1080)))


def test_an_ordinary_error_keeps_the_worker(pool):
    with pytest.raises(RenderFailed, match="could not draw"):
        pool.render("vega-lite", "{not json", "svg", 1, size=(1920, 1080))
    process = pool._idle.queue[0].process
    pool.render("vega-lite", GOOD_SPEC, "svg", 1, size=(1920, 1080))
    assert pool._idle.queue[0].process is process


def test_plotly_through_the_warm_worker(pool):
    figure = json.dumps(
        {"data": [{"type": "bar", "x": ["a\u2417"], "y": [1]}], "layout": {"width": 1920, "height": 1080}}
    )
    check_export("png", pool.render("plotly", figure, "png", 2))
    check_export("svg", pool.render("plotly", figure, "svg", 1))


def test_a_page_through_the_warm_worker(pool):
    """An HTML page (what BertViz's views are) drawn by the worker's Chrome: a slide-sized screenshot at 2x, and
    its <svg> with computed styles written in, text that is not XML shown as U+FFFD."""
    page = (
        "<html><head></head><body style='margin:0'><svg width='400' height='200' style='zoom:2'>"
        "<line x1='0' y1='0' x2='400' y2='200' stroke='black' stroke-width='9'></line>"
        "<line x1='0' y1='200' x2='400' y2='0' stroke='red' stroke-opacity='0'></line>"
        "<text x='10' y='50' style='font-size:30px'>a\x17b</text></svg></body></html>"
    )
    check_export("png", pool.render("page", page, "png", 2, size=(1920, 1080)))
    svg = pool.render("page", page, "svg", 1, size=(1920, 1080)).decode()
    check_export("svg", svg.encode())
    assert svg.count("<line") == 1 and "stroke-width:9px" in svg  # the transparent line is not drawn
    drawing = ElementTree.fromstring(svg)[1]  # after the white background: the page's <svg>, placed as drawn
    assert [drawing.get(name) for name in ("x", "y", "width", "height", "viewBox")] == [
        "0",
        "0",
        "800",
        "400",
        "0 0 400 200",
    ]
    assert "a\ufffdb" in svg


def test_on_canvas_gives_the_slide_size_and_keeps_the_drawing():
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="1884" height="1014" viewBox="0 0 1884 1014"><g/></svg>'
    placed = on_canvas(svg, 1920, 1080)
    check_export("svg", placed.encode())
    assert 'viewBox="0 0 1884 1014"' in placed and "<g/>" in placed
