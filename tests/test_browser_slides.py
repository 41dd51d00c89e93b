"""Slides, in a real browser: projector sizes, labels that never overlap, exports, and links that restore a view.

Opened in Debian's Chromium at 1280×720 and 1920×1080 with a 40-token sentence, in the normal view and in
presentation mode. The tick labels' boxes are read back from the page, as drawn.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import time
import xml.etree.ElementTree as ElementTree
from urllib.parse import quote

import pytest

from tests.browser import CHART, needs_chromium, open_tab, screenshot, wait_for_chart

pytestmark = needs_chromium

# 40 tokens for all-MiniLM-L6-v2 ([CLS] and [SEP] included).
FORTY_TOKENS = (
    "In the crowded lecture hall the students watched closely as their teacher explained how every attention "
    "head of a transformer spreads its weights over the words of one long sentence about flying arrows and ripe "
    "bananas today"
)
SIZES = [(1280, 720), (1920, 1080)]

# Each tick label as drawn: its centre on the page, its unrotated box, its angle and font size.
READ_TICKS = """
() => {
  const read = (selector) => [...document.querySelectorAll(selector)].map((t) => {
    const r = t.getBoundingClientRect(), b = t.getBBox();
    const m = (t.getAttribute("transform") || "").match(/rotate\\((-?[\\d.]+)/);
    return {cx: r.left + r.width / 2, cy: r.top + r.height / 2, w: b.width, h: b.height,
            angle: m ? parseFloat(m[1]) : 0, size: parseFloat(getComputedStyle(t).fontSize), text: t.textContent};
  });
  return {x: read("[data-testid='stPlotlyChart'] .xtick text"), y: read("[data-testid='stPlotlyChart'] .ytick text")};
}
"""


def _open(browser, app_url, width, height, *, present: bool, downloads: bool = False, query: str = ""):
    tab = open_tab(browser, width=width, height=height, downloads=downloads)
    url = f"{app_url}/?text={quote(FORTY_TOKENS)}{'&present=true' if present else ''}{query}"
    tab.page.goto(url)
    wait_for_chart(tab.page)
    return tab


def assert_no_overlap(ticks: dict) -> None:
    """Neighbouring labels keep apart: across for horizontal labels, perpendicular to the text when turned."""
    xs = sorted(ticks["x"], key=lambda t: t["cx"])
    for a, b in itertools.pairwise(xs):
        gap = b["cx"] - a["cx"]
        if a["angle"] == 0:
            assert gap >= (a["w"] + b["w"]) / 2, (a["text"], b["text"])
        else:
            assert gap * abs(math.sin(math.radians(a["angle"]))) >= a["size"], (a["text"], b["text"], gap)
    ys = sorted(ticks["y"], key=lambda t: t["cy"])
    for a, b in itertools.pairwise(ys):
        assert b["cy"] - a["cy"] >= a["size"], (a["text"], b["text"])


@pytest.mark.parametrize("present", [False, True], ids=["screen", "presentation"])
@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_forty_tokens_at_projector_sizes(browser, app_url, width, height, present):
    tab = _open(browser, app_url, width, height, present=present)
    page = tab.page
    ticks = page.evaluate(READ_TICKS)
    assert len(ticks["x"]) >= 10 and len(ticks["y"]) >= 10
    assert_no_overlap(ticks)
    box = page.locator(CHART).bounding_box()
    if present:
        # The 16:9 figure fits the window without scrolling.
        assert box["y"] >= 0 and box["y"] + box["height"] <= height and box["x"] + box["width"] <= width
        assert abs(box["width"] / box["height"] - 16 / 9) < 0.05
        assert min(t["size"] for t in ticks["x"] + ticks["y"]) >= 16
    elif height >= 1080:
        assert box["y"] + box["height"] <= height  # the whole chart above the fold on a large screen
    name = f"attention-heatmaps-{width}x{height}{'-presentation' if present else ''}.png"
    screenshot(page, name)
    assert tab.external == [] and tab.errors == []
    tab.context.close()


def test_exports_are_slides_named_after_what_they_show(browser, app_url, tmp_path):
    from PIL import Image

    tab = _open(browser, app_url, 1400, 1000, present=False, downloads=True, query="&layer=2&head=5")
    files = {}
    for fmt in ("PNG", "SVG", "HTML"):
        with tab.page.expect_download(timeout=60_000) as download:
            tab.page.get_by_role("button", name=fmt, exact=True).click()
        files[fmt] = tmp_path / download.value.suggested_filename
        download.value.save_as(files[fmt])
    for fmt, path in files.items():
        assert path.name.startswith("attention-weights_all-minilm-l6-v2_in-the-crowded-lecture-hall")
        assert "_layer-2_head-5_" in path.name and path.suffix == f".{fmt.lower()}"
    assert Image.open(io.BytesIO(files["PNG"].read_bytes())).size == (3840, 2160)
    svg = ElementTree.fromstring(files["SVG"].read_bytes())
    assert (svg.get("width"), svg.get("height")) == ("1920", "1080")

    # The HTML file opens offline and draws the interactive figure, asking the network for nothing.
    offline = open_tab(browser, width=1920, height=1080)
    offline.page.goto(files["HTML"].as_uri())
    offline.page.locator(".main-svg").first.wait_for(timeout=30_000)
    assert offline.page.locator(".hm image").count() == 1
    assert offline.page.title().startswith("Attention weights · layer 2 · head 5")
    assert offline.external == [] and offline.errors == []
    assert tab.external == [] and tab.errors == []
    offline.context.close()
    tab.context.close()


FIGURE_STATE = """
() => {
  const plot = document.querySelector("[data-testid='stPlotlyChart'] .js-plotly-plot");
  return JSON.stringify({title: plot.layout.title.text, subtitle: plot.layout.title.subtitle.text,
                         zmax: plot.data[0].zmax, z: plot.data[0].z, x: plot.data[0].x,
                         width: plot.layout.width, height: plot.layout.height});
}
"""


def test_a_shared_link_gives_the_same_figure_in_a_fresh_browser(browser, app_url):
    teacher = _open(browser, app_url, 1280, 720, present=True, query="&layer=3&head=9&stretch=true")
    shown = json.loads(teacher.page.evaluate(FIGURE_STATE))
    link = teacher.page.url
    assert "head=9" in link and "stretch=true" in link and "present=true" in link
    student = open_tab(browser, width=1280, height=720)
    student.page.goto(link)
    wait_for_chart(student.page)
    assert json.loads(student.page.evaluate(FIGURE_STATE)) == shown
    assert shown["title"] == "Attention weights · layer 3 · head 9"
    assert student.external == [] and student.errors == []
    teacher.context.close()
    student.context.close()


def test_a_clamped_head_comes_back_in_the_browser(browser, app_url):
    """A link to head 9, then a model with 6 heads (clamped, said so), then back: head 9 again."""
    tab = _open(browser, app_url, 1400, 1000, present=False, query="&head=9")
    page = tab.page
    page.get_by_placeholder("openai-community/gpt2").fill("bundled/prose-gpt2")
    page.get_by_placeholder("openai-community/gpt2").press("Enter")
    page.get_by_text("Head 9 does not exist here").wait_for(timeout=60_000)
    wait_for_chart(page)
    assert page.locator(f"{CHART} .gtitle").first.text_content().endswith("head 5")  # prose-gpt2 has 6 heads
    page.get_by_placeholder("openai-community/gpt2").fill("sentence-transformers/all-MiniLM-L6-v2")
    page.get_by_placeholder("openai-community/gpt2").press("Enter")
    page.wait_for_url("**head=9**", timeout=60_000)
    wait_for_chart(page)
    assert page.locator(f"{CHART} .gtitle").first.text_content().endswith("head 9")
    assert tab.external == [] and tab.errors == []
    tab.context.close()


def test_scrolling_never_reruns_the_page(browser, app_url):
    """The size probe measures the figure's place in the page, not in the window: scrolling sends the server
    nothing (it once reran the page while the visitor scrolled, which also broke the export buttons just drawn)."""
    tab = open_tab(browser, width=1600, height=1000)
    sent = []
    tab.page.on("websocket", lambda socket: socket.on("framesent", lambda payload: sent.append(payload)))
    tab.page.goto(f"{app_url}/sampling?model=bundled%2Fprose-llama&view=stages")  # the longest of its views
    wait_for_chart(tab.page)
    before = len(sent)
    for distance in (400, 900, 1500, -600, 2000):
        tab.page.mouse.move(800, 500)
        tab.page.mouse.wheel(0, distance)
        time.sleep(1.5)
    assert len(sent) == before
    assert tab.errors == []
    tab.context.close()
