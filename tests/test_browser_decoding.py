"""The decoding pages in a real browser, offline: each view renders, nothing leaves localhost, no errors.

Each page is opened by its own URL with the bundled decoder (a shared link, as a student would get it);
screenshots land in tests/artifacts/screenshots/.
"""

from __future__ import annotations

import pytest

from tests.browser import (
    CHART,
    needs_chromium,
    open_tab,
    screenshot,
    wait_for_chart,
    wait_until_settled,
)

pytestmark = needs_chromium
MODEL = "model=bundled/prose-llama"  # the default decoder


def _open(browser, url: str, *, height: int = 1400):
    tab = open_tab(browser, width=1400, height=height)
    tab.page.goto(url)
    wait_for_chart(tab.page)
    return tab


def _done(tab, name: str) -> None:
    screenshot(tab.page, name)
    assert tab.external == [], tab.external
    assert tab.errors == [], tab.errors
    tab.context.close()


def test_greedy_search_page(browser, app_url):
    tab = _open(browser, f"{app_url}/greedy_search?{MODEL}&steps=8")
    page = tab.page
    assert page.locator("[data-testid='stTable']").count() == 1  # the greedy table, its cells wrapping
    assert page.locator(f"{CHART} .hm").count() == 1  # the candidates grid
    assert page.locator(f"{CHART} .gtitle").first.text_content() == "Greedy search · 8 steps"
    _done(tab, "greedy-search.png")


def test_beam_search_page_draws_the_whole_tree(browser, app_url):
    tab = _open(browser, f"{app_url}/beam_search?{MODEL}&beams=4&ngram=2&returned=2", height=1600)
    page = tab.page
    tree = page.locator(CHART).first
    points = tree.locator(".scatterlayer .point").count()
    assert points > 4 * 2 * 5  # every candidate of every step, pruned ones included
    legend = tree.locator(".legendtext").all_text_contents()
    assert {"returned", "running beam", "pruned"} <= set(legend)
    page.get_by_text("Finished pool").wait_for()
    _done(tab, "beam-search.png")


ONE_PLOTLY_CHART_ALONE = f"""() => document.querySelectorAll("[data-testid='stVegaLiteChart']").length === 0
    && document.querySelectorAll("{CHART}").length === 1"""


def test_sampling_page_draws_the_linked_panels(browser, app_url):
    """The page draws one of its three views at a time: the chapter's two panels first; a click on another
    view (a radio of the segmented control) draws it (and only it) and puts it in the link."""
    tab = _open(browser, f"{app_url}/sampling?{MODEL}&temperature=0.8&top_k=40&top_p=0.9&draw=true&seed=3")
    page = tab.page
    vega = page.locator("[data-testid='stVegaLiteChart']")
    vega.first.locator("canvas, svg").first.wait_for(timeout=30_000)
    assert vega.count() == 1 and page.locator(CHART).count() == 0
    assert page.locator("[data-testid='stDataFrame']").count() == 1  # the seeded draws
    screenshot(page, "sampling.png")
    for label, view, title in (
        ("Temperatures", "temperatures", "Temperature · T ="),
        ("Stages", "stages", "Sampling pipeline"),
    ):
        page.get_by_role("radio", name=label, exact=True).click()
        page.wait_for_url(f"**view={view}**", timeout=30_000)
        page.locator(f"{CHART} .main-svg").first.wait_for(timeout=30_000)
        # The last view's chart goes at the end of the run that draws this one (a timeout fails the test).
        page.wait_for_function(ONE_PLOTLY_CHART_ALONE, timeout=30_000)
        wait_until_settled(page)  # the view's size probe may ask for one more run: its end is what is read
        assert vega.count() == 0 and page.locator(CHART).count() == 1
        assert title in page.locator(f"{CHART} .gtitle").first.text_content()
    assert page.locator("[data-testid='stDataFrame']").count() == 2  # the stages, then the seeded draws
    _done(tab, "sampling-stages.png")


@pytest.mark.parametrize("present", [False, True])
def test_a_sampling_slider_reruns_the_page_body_and_keeps_the_link(browser, app_url, present):
    """The page's body is a fragment (issue 13): moving temperature redraws the figure shown and the seeded
    draws for the new value and writes it into the link, while the sidebar stays; in presentation mode too,
    where the sliders sit behind the Controls button. The other views then draw the moved value too."""
    url = f"{app_url}/sampling?{MODEL}&temperature=0.8&draw=true" + ("&present=true" if present else "")
    tab = _open(browser, url)
    page = tab.page
    if present:
        page.get_by_role("button", name="Controls").click()
    slider = page.get_by_role("group", name="Temperature").get_by_role("slider")
    slider.focus()
    slider.press("ArrowRight")  # 0.8 -> 0.85
    slider.blur()
    page.wait_for_url("**temperature=0.85**", timeout=30_000)
    drawn_with = "() => [...document.querySelectorAll(\"{}\")].some(e => e.textContent.includes('T = 0.85'))"
    page.wait_for_function(drawn_with.format("[data-testid='stVegaLiteChart']"), timeout=30_000)
    assert page.locator("[data-testid='stSidebar']").count() == 1
    assert page.get_by_text("T = 0.85, top-k = 0").count() >= 1  # the caption under the controls
    if present:
        page.keyboard.press("Escape")  # the controls' popover closed, the views' buttons in reach
    page.get_by_role("radio", name="Temperatures", exact=True).click()
    page.wait_for_function(drawn_with.format(CHART), timeout=30_000)
    _done(tab, f"sampling-moved{'-presentation' if present else ''}.png")


def test_compare_strategies_page(browser, app_url):
    tab = _open(browser, f"{app_url}/compare_strategies?{MODEL}&steps=12")
    page = tab.page
    assert page.locator("[data-testid='stMetric']").count() == 3
    assert page.locator(f"{CHART} .bars .point").count() == 3
    _done(tab, "compare-strategies.png")


def test_attention_while_generating_page(browser, app_url):
    tab = _open(browser, f"{app_url}/generation_attention?{MODEL}&steps=8&step=5")
    page = tab.page
    assert page.locator(f"{CHART} .hm image").count() == 1
    # Steps count from 1 everywhere: a link to step 5 shows "step 5 of 8".
    assert "step 5 of 8" in page.locator(f"{CHART} .gtitle").first.text_content()
    assert page.get_by_text("verified").count() >= 1
    _done(tab, "attention-while-generating.png")


def test_the_kv_cache_section_opens_on_a_click_and_keeps_its_place_in_the_link(browser, app_url):
    """Closed, the greedy page draws its one chart; a click opens the section, which draws the cache's size, what
    each pass computes and the passes' times (with the model's own numbers) and puts kv=true in the link."""
    tab = open_tab(browser, width=1280, height=720)
    page = tab.page
    page.goto(f"{app_url}/greedy_search?{MODEL}&steps=8")
    wait_for_chart(page)
    assert page.locator(CHART).count() == 1
    page.get_by_text("KV cache: what generation keeps").click()
    page.locator(CHART).nth(3).locator(".main-svg").first.wait_for(timeout=120_000)
    wait_for_chart(page)
    titles = [page.locator(f"{CHART} .gtitle").nth(i).text_content() for i in (1, 2, 3)]
    assert titles == [
        "KV cache size · 8 steps",
        "What each pass computes, with the KV cache and without · 8 steps",
        "Each pass's measured time, with the KV cache and without · 8 steps",
    ]
    assert "kv=true" in page.url
    sizes = page.locator(CHART).nth(1)
    assert sizes.locator(".xtick").count() == 9  # the prefill and 8 steps
    # the default decoder groups its KV heads (2 serve 8 query heads: tests/test_app_decoding.py checks the numbers)
    assert "Grouped KV heads: 2 KV heads serve 8 query heads" in page.inner_text("body")
    page.get_by_text("Verified: at every pass").scroll_into_view_if_needed()
    sizes.scroll_into_view_if_needed()
    _done(tab, "greedy-search-kv-cache-1280x720.png")
