"""Presentation mode on a projector, in a real browser: every page's main view fills the window.

At 1280×720 and 1920×1080 with ``?present=true`` (each page fresh at one size, then its window resized to the
other), each page's main view (its first chart, or BertViz's frame) takes at least 75% of the window's width or
height, lies wholly inside the window without scrolling, and its tick labels and the numbers written in its cells
are at least 16 px; and axe-core finds no serious or critical WCAG 2.1 AA violation on it (tests/axe.py).
Screenshots of every page at both sizes land in tests/artifacts/screenshots/ (docs/screenshots/ keeps a copy)."""

from __future__ import annotations

import pytest

from explorer.ui import navigation
from tests.axe import assert_accessible
from tests.browser import needs_chromium, open_tab, screenshot, wait_for_chart, wait_until_settled

pytestmark = needs_chromium

DECODER = "model=bundled%2Fprose-llama"  # the default decoder
PAGES = {
    "attention-heatmaps": "",
    "tokens-embeddings": "tokens_embeddings",
    "model-anatomy": "model_anatomy",
    "attention-step-by-step": "attention_step_by_step",
    "neuron-view": "neuron_view",
    "all-heads": "heads_overview",
    "bertviz-head-view": "bertviz_views",
    "head-statistics": "head_statistics",
    "compare": "compare_attention",
    "greedy-search": f"greedy_search?{DECODER}",
    "beam-search": f"beam_search?{DECODER}",
    "sampling": f"sampling?{DECODER}",
    "compare-strategies": f"compare_strategies?{DECODER}",
    "attention-while-generating": f"generation_attention?{DECODER}",
    "logit-lens": f"logit_lens?{DECODER}",
    "head-types": "head_types",
    "which-heads-matter": f"head_ablation?{DECODER}&ablate=3.5",
    "patching": f"patching?{DECODER}",
    "why-this-token": f"why_this_token?{DECODER}",
    "lecture": "lecture?deck=generation&slide=2",  # a Plotly slide: the test waits for a Plotly chart
}
SIZES = [(1280, 720), (1920, 1080)]

# The main view: the largest chart or frame on the page (Compare's two charts side by side count as one view).
MAIN_VIEW = """
() => {
  const views = [...document.querySelectorAll(
      "[data-testid='stPlotlyChart'], [data-testid='stVegaLiteChart'], [data-testid='stIFrame'], iframe")]
    .map((e) => e.getBoundingClientRect()).filter((r) => r.width > 50 && r.height > 50);
  if (!views.length) return null;
  const first = views.reduce((a, b) => (b.width * b.height > a.width * a.height ? b : a));
  const row = views.filter((r) => Math.abs(r.top - first.top) < 2 && Math.abs(r.height - first.height) < 2);
  const left = Math.min(...row.map((r) => r.left)), right = Math.max(...row.map((r) => r.right));
  return {left, right, top: first.top, bottom: first.bottom, width: right - left, height: first.height,
          window: [window.innerWidth, window.innerHeight]};
}
"""
# Font sizes of the first chart's tick labels and of the text written in its cells or beside its markers.
TEXT_SIZES = """
() => {
  const chart = document.querySelector("[data-testid='stPlotlyChart']");
  if (!chart) return null;
  const size = (t) => parseFloat(getComputedStyle(t).fontSize);
  return {ticks: [...chart.querySelectorAll(".xtick text, .ytick text")].map(size),
          cells: [...chart.querySelectorAll(".textpoint text, .heatmaplayer text")].map(size)};
}
"""


# What a screen reader is told first: the tab's title, and the page marked as current in the menu's landmark.
NAMED = """
() => ({title: document.title,
        current: [...document.querySelectorAll("[role='navigation'] [role='list'] > [role='listitem'] "
                                               + "a[aria-current='page'] [data-testid='stMarkdownContainer']")]
                 .map((label) => label.innerText.trim())})
"""


def named(path: str) -> dict:
    file = f"pages/{path.partition('?')[0] or 'attention_heatmaps'}.py"
    title = next(title for _, page, title, _ in navigation.PAGES if page == file)
    return {"title": navigation.page_title(title), "current": [title]}


def check_the_main_view(tab, name: str, width: int, height: int) -> None:
    view = tab.page.evaluate(MAIN_VIEW)
    screenshot(tab.page, f"{name}-{width}x{height}-presentation.png")
    where = f"{name} at {width}×{height}: {view}"
    assert view is not None, where
    assert view["window"] == [width, height], where
    assert max(view["width"] / width, view["height"] / height) >= 0.75, where
    assert view["left"] >= 0 and view["top"] >= 0 and view["right"] <= width and view["bottom"] <= height, where
    sizes = tab.page.evaluate(TEXT_SIZES)
    if sizes is not None:
        assert sizes["ticks"] and min(sizes["ticks"]) >= 16, (where, sizes)
        assert not sizes["cells"] or min(sizes["cells"]) >= 16, (where, sizes)


def wait_for_view(tab, name: str) -> None:
    if name.startswith("bertviz"):
        tab.page.frame_locator("iframe").first.locator("svg line").first.wait_for(state="attached", timeout=120_000)
        wait_until_settled(tab.page)
    else:
        wait_for_chart(tab.page)


@pytest.mark.parametrize("name", list(PAGES))
def test_the_main_view_fills_the_projector(browser, app_url, name):
    """Each page opened at one size, then the window resized to the other: every other page opens at the larger
    size, so both sizes are checked as a fresh page and as a window resized under a drawn page."""
    sizes = SIZES if list(PAGES).index(name) % 2 == 0 else SIZES[::-1]
    (width, height), resized = sizes
    tab = open_tab(browser, width=width, height=height)
    path = PAGES[name]
    tab.page.goto(f"{app_url}/{path}{'&' if '?' in path else '?'}present=true")
    wait_for_view(tab, name)
    check_the_main_view(tab, name, width, height)
    assert_accessible(tab.page, f"{name} in presentation mode at {width}×{height}")  # once a page: axe takes seconds
    assert tab.page.evaluate(NAMED) == named(path), name
    tab.page.set_viewport_size({"width": resized[0], "height": resized[1]})
    wait_for_view(tab, name)
    check_the_main_view(tab, name, *resized)
    assert tab.errors == [] and tab.external == []
    tab.context.close()
