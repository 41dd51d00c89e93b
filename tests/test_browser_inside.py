"""Clicks in a real browser: a candidate of the greedy grid and a node of the beam tree branch there, a square
of the ablation map ablates that head; each lands in the link, and the page redraws for it."""

from __future__ import annotations

import re

from tests.browser import CHART, needs_chromium, open_tab, wait_for_chart, wait_until_idle

pytestmark = needs_chromium
DECODER = "model=bundled%2Fprose-llama"  # the default decoder


def click_point(page, points_selector: str, index: int) -> None:
    """Click where a marker is drawn: Plotly takes clicks on its plot area, not on the marker's element."""
    marker = page.locator(points_selector).nth(index)
    marker.scroll_into_view_if_needed()
    box = marker.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def open_page(browser, url: str):
    tab = open_tab(browser, width=1400, height=1000)
    tab.page.goto(url, wait_until="domcontentloaded")
    wait_for_chart(tab.page)
    return tab


def test_clicking_a_candidate_branches_the_greedy_search(browser, app_url):
    tab = open_page(browser, f"{app_url}/greedy_search?{DECODER}&steps=6")
    page = tab.page
    # The grid's click targets, column by column (5 candidates a step): step 3 (index 2), the model's second choice.
    click_point(page, f"{CHART} .subplot.xy .scatterlayer .trace:first-child path.point", 2 * 5 + 1)
    page.wait_for_url(re.compile(r"force=\d+%2C\d+%2C\d+"), timeout=60_000)
    # The link changes as the branch's run starts: wait for what it draws (a timeout fails the test).
    page.get_by_text("Branch:").first.wait_for(state="attached", timeout=60_000)
    wait_until_idle(page)
    assert "the model's #2" in page.inner_text("body")
    assert tab.external == [] and tab.errors == []
    tab.context.close()


def test_clicking_a_beam_node_branches_every_beam(browser, app_url):
    tab = open_page(browser, f"{app_url}/beam_search?{DECODER}&steps=4&beams=2")
    page = tab.page
    click_point(page, f"{CHART} .scatterlayer .trace path.point", 1)
    page.wait_for_url(re.compile(r"force=\d+"), timeout=60_000)
    page.get_by_text("Branch:").first.wait_for(state="attached", timeout=60_000)
    wait_until_idle(page)
    assert tab.external == [] and tab.errors == []
    tab.context.close()


def test_clicking_a_square_of_the_ablation_map_ablates_that_head(browser, app_url):
    tab = open_page(browser, f"{app_url}/head_ablation?{DECODER}")
    page = tab.page
    heads = 8  # a layer's heads in the default decoder (prose-llama: 8 layers × 8 heads), the map's points by layer
    click_point(page, f"{CHART} .scatterlayer .trace:first-child path.point", 3 * heads + 5)  # layer 3, head 5
    page.wait_for_url(re.compile(r"ablate=3\.5"), timeout=60_000)
    wait_until_idle(page)
    page.get_by_text("Next token, with and without the heads").first.wait_for(timeout=60_000)
    assert tab.external == [] and tab.errors == []
    tab.context.close()
