"""What a newcomer sees, in a real browser at a laptop's size: views drawn as their values are (issue 27).

- The sinusoidal position encoding has no more columns than pixels to draw them in, and each column's colour
  is its value's, at a laptop's width and in presentation mode (drawn narrower than its columns, the sin/cos
  stripes used to alias into fading waves and a solid block).
- The causal-mask chapter preset gives the chapter's mask in presentation mode too: the text boxes sit in a
  popover there, and a text box the browser had not mounted used to send its old text back.
"""

from __future__ import annotations

import pytest

from tests.browser import CHART, needs_chromium, open_tab, screenshot, wait_for_chart, wait_until_idle

pytestmark = needs_chromium

# Each chart's heatmap traces as drawn (plotly.js's own computed data): their shape and row labels.
HEATMAPS = """
() => [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")].map((plot) =>
  plot.calcdata.filter((trace) => trace[0].trace.type === "heatmap").map((trace) => ({
    rows: trace[0].z.length, columns: trace[0].z[0].length, y: trace[0].trace.y || null})))
"""


def _click_preset(page) -> None:
    page.get_by_role("button", name="Controls").click()
    page.get_by_role("button", name="Chapter preset").click()
    wait_until_idle(page)
    wait_for_chart(page)


@pytest.mark.parametrize("arrival", ["link", "sidebar"])
def test_the_causal_mask_preset_in_presentation_mode(browser, app_url, arrival):
    """Presentation mode from a link (the text popover opened and closed first) or switched on in the sidebar
    (the text box was on the page before): the preset's text, a 5 × 5 mask of 1s and 0s, −∞ beside it."""
    tab = open_tab(browser, width=1280, height=800)
    page = tab.page
    if arrival == "link":
        page.goto(f"{app_url}/?present=true")
        wait_for_chart(page)
        page.get_by_role("button", name="Text:").click()
        page.locator("textarea").first.wait_for(timeout=60_000)
        page.keyboard.press("Escape")
        wait_until_idle(page)
    else:
        page.goto(app_url)
        wait_for_chart(page)
        page.get_by_text("Presentation mode").click()
        wait_for_chart(page)
    _click_preset(page)
    page.wait_for_timeout(2000)  # any later run (the size probe's) must not bring the old text back
    wait_for_chart(page)
    charts = page.evaluate(HEATMAPS)
    screenshot(page, f"causal-mask-preset-{arrival}-1280x800-presentation.png")
    assert "text=She+was+not+at+home" in page.url and "show=mask" in page.url, page.url
    assert page.get_by_role("button", name="Text: She was not at home").count() == 1
    mask, scores = charts[0][0], charts[1][0]
    assert (mask["rows"], mask["columns"]) == (5, 5)
    assert [label.split(" ", 1)[1] for label in mask["y"]] == ["'She'", "' was'", "' not'", "' at'", "' home'"]
    digits = page.locator(f"{CHART}").first.locator(".heatmaplayer text, .textpoint text").all_text_contents()
    assert sorted(set(digits)) == ["0", "1"]
    assert "−∞" in page.locator(f"{CHART}").nth(1).locator(".heatmaplayer text").all_text_contents()
    assert (scores["rows"], scores["columns"]) == (5, 5)
    assert tab.errors == [] and tab.external == []
    tab.context.close()
