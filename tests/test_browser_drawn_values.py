"""What a newcomer sees, in a real browser at a laptop's size: views drawn as their values are (issue 27).

- The sinusoidal position encoding has no more columns than pixels to draw them in, and each column's colour
  is its value's, at a laptop's width and in presentation mode (drawn narrower than its columns, the sin/cos
  stripes used to alias into fading waves and a solid block).
- The causal-mask chapter preset gives the chapter's mask in presentation mode too: the text boxes sit in a
  popover there, and a text box the browser had not mounted used to send its old text back.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

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


# Where plotly.js drew each cell of the chart titled ``title``: the centre of every column of every heatmap, in
# window pixels, with its value, its dimension (customdata, else its x) and its row (the position).
CELLS = """
(title) => {
  const plot = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")]
    .find((p) => (p.layout.title.text || "").startsWith(title));
  if (!plot) return null;
  const box = plot.getBoundingClientRect(), layout = plot._fullLayout;
  return plot.calcdata.map((trace) => {
    const t = trace[0].trace, x = layout[t.xaxis.replace("x", "xaxis")], y = layout[t.yaxis.replace("y", "yaxis")];
    return {drawn: x._length, zmin: t.zmin, zmax: t.zmax, colorscale: t.colorscale, cells: trace[0].z.flatMap(
      (row, r) => row.map((z, c) => ({value: z, dimension: t.customdata ? t.customdata[r][c] : t.x[c], position: t.y[r],
        x: box.left + x._offset + x.l2p(t.x[c]), y: box.top + y._offset + y.l2p(t.y[r])})))};
  });
}
"""


def _colour(colorscale, t: float) -> np.ndarray:
    """plotly.js's colour for ``t`` in [0, 1]: linear in RGB between the scale's stops."""
    stops = [s for s, _ in colorscale]
    rgb = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for _, c in colorscale], dtype=float)
    return np.array([np.interp(t, stops, rgb[:, channel]) for channel in range(3)])


@pytest.mark.parametrize("present", [False, True], ids=["screen", "presentation"])
def test_the_sinusoidal_encoding_is_drawn_as_its_values(browser, app_url, present):
    """At 1280×800 each panel has no more columns than pixels, and the pixel at the centre of every cell has the
    colour of PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...), computed here from the formula."""
    tab = open_tab(browser, width=1280, height=800)
    page = tab.page
    page.goto(f"{app_url}/tokens_embeddings{'?present=true' if present else ''}")
    wait_for_chart(page)
    page.locator(CHART).filter(has_text="Sinusoidal encoding").scroll_into_view_if_needed()
    wait_for_chart(page)
    panels = page.evaluate(CELLS, "Sinusoidal encoding")
    shot = np.asarray(Image.open(io.BytesIO(page.screenshot())).convert("RGB"), dtype=float)
    screenshot(page, f"sinusoidal-encoding-1280x800{'-presentation' if present else ''}.png")
    assert panels
    width = 384  # the MiniLM's
    for panel in panels:
        columns = len({cell["dimension"] for cell in panel["cells"]})
        assert columns <= panel["drawn"], (columns, panel["drawn"])
        for cell in panel["cells"]:
            pair, wave = divmod(cell["dimension"], 2)
            angle = int(str(cell["position"]).rpartition(" ")[2]) / 10000 ** (2 * pair / width)
            value = np.cos(angle) if wave else np.sin(angle)
            assert cell["value"] == pytest.approx(value, abs=1e-5)
            expected = _colour(panel["colorscale"], (value - panel["zmin"]) / (panel["zmax"] - panel["zmin"]))
            drawn = shot[int(cell["y"]), int(cell["x"])]
            assert np.abs(drawn - expected).max() <= 12, (cell, drawn, expected)
    assert tab.errors == [] and tab.external == []
    tab.context.close()
