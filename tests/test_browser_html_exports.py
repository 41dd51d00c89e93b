"""HTML exports and BertViz's head view in a real browser (issue 26 §3, issue 27 items 12 and 13).

An exported HTML file opened on a 1280×720 screen fits the window (Plotly, Altair and BertViz alike) instead of
staying 1920×1080 and being cut off on the right; BertViz's export loads offline and stays interactive; on a
projector BertViz's head view fills the width of the page, not its left half.
"""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.render import export
from explorer.render.bertviz import head_view_slide
from explorer.render.grid import heads_grid
from explorer.render.sampling import distribution_panels
from explorer.render.style import SLIDE, FigureInfo
from tests.browser import needs_chromium, open_tab, screenshot, wait_until_settled

pytestmark = needs_chromium

TEXT = "time flies like an arrow"
INFO = FigureInfo("Export", model="org/model", text=TEXT, where=("layer 2",))
# Where each kind of export has drawn: its drawing is there once these exist.
DRAWN = {"plotly": ".main-svg .heatmaplayer", "altair": ".vega-embed svg .mark-rect path", "bertviz": "#vis svg line"}
# The union of the page's drawings (every outermost <svg>, but Plotly's text-measuring one parked off screen at
# -10000 px), and whether the page scrolls sideways.
EXTENT = """
() => {
  const boxes = [...document.querySelectorAll("svg")].filter((s) => !s.parentElement.closest("svg"))
    .map((s) => s.getBoundingClientRect()).filter((r) => r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0);
  const root = document.documentElement;
  return {left: Math.min(...boxes.map((r) => r.left)), top: Math.min(...boxes.map((r) => r.top)),
          right: Math.max(...boxes.map((r) => r.right)), bottom: Math.max(...boxes.map((r) => r.bottom)),
          scrollWidth: root.scrollWidth, clientWidth: root.clientWidth};
}
"""


@pytest.fixture(scope="module")
def capture(_minilm_loads):
    return explorer.capture(_minilm_loads("cpu"), TEXT)


def _exported(kind: str, capture) -> bytes:
    if kind == "plotly":
        figure = heads_grid(capture.main.attentions, capture.main.masks_by_layer(), info=INFO, look=SLIDE)
    elif kind == "altair":
        decoder = explorer.load_model(explorer.DEFAULT_DECODER, device="cpu")
        distribution = explorer.next_token_distribution(decoder, "It was a", top_k=5)
        figure = distribution_panels(distribution, info=INFO, look=SLIDE)
    else:
        figure = head_view_slide(capture, info=INFO, layers=[2], heads=[3], layer=2)
    return export.export(figure, "html", title=INFO.title())


def _open(browser, tmp_path, kind: str, data: bytes, width: int, height: int):
    path = tmp_path / f"{kind}.html"
    path.write_bytes(data)
    tab = open_tab(browser, width=width, height=height)
    tab.page.goto(path.as_uri())
    tab.page.locator(DRAWN[kind]).first.wait_for(state="attached", timeout=60_000)
    tab.page.wait_for_timeout(300)  # the fit runs on the next frame after the drawing's size settles
    return tab


@pytest.mark.parametrize("kind", list(DRAWN))
def test_an_html_export_fits_a_small_screen(browser, capture, tmp_path, kind):
    tab = _open(browser, tmp_path, kind, _exported(kind, capture), 1280, 720)
    extent = tab.page.evaluate(EXTENT)
    screenshot(tab.page, f"html-export-{kind}-1280x720.png")
    assert extent["left"] >= -0.5 and extent["top"] >= -0.5, extent
    assert extent["right"] <= 1280.5 and extent["bottom"] <= 720.5, extent  # nothing cut off
    assert extent["scrollWidth"] <= extent["clientWidth"], extent  # no sideways scroll
    # Fitted, not shrunk to a stamp: the slide takes the window's width or height.
    assert max((extent["right"] - extent["left"]) / 1280, (extent["bottom"] - extent["top"]) / 720) > 0.85, extent
    assert tab.errors == [] and tab.external == []
    tab.context.close()


def test_the_bertviz_html_export_is_offline_and_interactive(browser, capture, tmp_path):
    tab = _open(browser, tmp_path, "bertviz", _exported("bertviz", capture), 1920, 1080)
    page = tab.page
    drawn = "line => line.filter((l) => parseFloat(getComputedStyle(l).strokeOpacity) > 0).length"
    assert page.locator("#attention line").evaluate_all(drawn) == np.count_nonzero(
        np.rint(capture.main.attentions[2, 3] * 255)
    )
    # Hovering a token on the left shows only its lines, as in BertViz.
    page.locator("#left text", has_text="flies").first.hover()
    visible = page.evaluate(
        """() => [...document.querySelectorAll("#attention line")]
              .filter((l) => getComputedStyle(l).visibility === "visible")
              .map((l) => l.getAttribute("left-token-index"))"""
    )
    assert visible and set(visible) == {"2"}
    screenshot(page, "html-export-bertviz-hover.png")
    assert tab.errors == [] and tab.external == []  # every request but the file's own was refused
    tab.context.close()


# The head view's drawing (its two token columns, BertViz's hover boxes included, and the lines between) against
# the main area's content width.
HEAD_VIEW_WIDTH = """
() => {
  const frame = document.querySelector("iframe");
  const main = document.querySelector("[data-testid='stMainBlockContainer']");
  const svg = frame.contentDocument.querySelector("#vis svg");
  const parts = [...svg.querySelectorAll("text, line, rect.background")].map((e) => e.getBoundingClientRect())
    .filter((r) => r.width > 0);
  const style = getComputedStyle(main);
  return {drawn: Math.max(...parts.map((r) => r.right)) - Math.min(...parts.map((r) => r.left)),
          main: main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)};
}
"""
SIZES = [(1280, 720), (1920, 1080)]


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_head_view_fills_the_width_in_presentation_mode(browser, app_url, width, height):
    tab = open_tab(browser, width=width, height=height)
    tab.page.goto(f"{app_url}/bertviz_views?present=true")
    tab.page.frame_locator("iframe").first.locator("svg line").first.wait_for(state="attached", timeout=120_000)
    wait_until_settled(tab.page)  # the size probe may rerun the page once with the window's room
    tab.page.frame_locator("iframe").first.locator("svg line").first.wait_for(state="attached", timeout=60_000)
    measured = tab.page.evaluate(HEAD_VIEW_WIDTH)
    screenshot(tab.page, f"bertviz-head-view-{width}x{height}-presentation-width.png")
    assert measured["drawn"] >= 0.75 * measured["main"], measured
    assert tab.errors == [] and tab.external == []
    tab.context.close()
