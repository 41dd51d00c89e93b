"""The real app in a real browser: `streamlit run app.py` served locally, driven by Debian's Chromium.

Every request that leaves 127.0.0.1 is aborted and recorded (see tests/browser.py), so each test also
proves the page needs no internet.
"""

import pytest

from tests.browser import (
    CHART,
    ROOT,
    chart_title,
    needs_chromium,
    open_tab,
    screenshot,
    wait_for_chart,
    wait_until_idle,
)

pytestmark = needs_chromium


@pytest.fixture
def browser_tab(browser):
    tab = open_tab(browser)
    yield tab
    tab.context.close()


def test_heatmap_renders_updates_and_needs_no_internet(app_url, browser_tab):
    page = browser_tab.page
    # A shared link: head 1 comes from the URL, as it would for whoever opens it.
    page.goto(f"{app_url}/?head=1", wait_until="domcontentloaded")
    wait_for_chart(page)
    chart = page.locator(CHART)
    assert chart.locator(".hm image").count() == 1  # Plotly drew the heatmap's cells
    assert chart_title(page) == "Attention weights · layer 0 · head 1"

    head = page.get_by_role("group", name="Head").get_by_role("slider")
    head.focus()
    head.press("ArrowRight")
    head.blur()
    page.wait_for_function(
        f"() => document.querySelector(\"{CHART} .gtitle\")?.textContent === 'Attention weights · layer 0 · head 2'",
        timeout=30_000,
    )
    page.wait_for_url("**head=2**", timeout=10_000)  # the new view is a shareable link

    wait_until_idle(page)
    # One caption under the model picker: elements keep their places across reruns, none is left over.
    assert page.locator("[data-testid='stSidebar'] [data-testid='stCaptionContainer']").count() == 1
    hover_cell(page, row=3, column=2, size=7)  # "like" attending to "flies": head 2 looks one token back
    hover = page.locator(".hoverlayer .hovertext").text_content(timeout=10_000)
    assert "query #3 'like' → key #2 'flies'" in hover

    screenshot(page, "attention-heatmaps.png")
    assert browser_tab.external == []
    assert browser_tab.errors == []


def hover_cell(page, *, row: int, column: int, size: int) -> None:
    """Move the mouse to the centre of one cell of the size x size heatmap (scrolled into view first)."""
    page.locator(CHART).first.scroll_into_view_if_needed()
    box = page.locator(f"{CHART} .nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + (column + 0.5) * box["width"] / size, box["y"] + (row + 0.5) * box["height"] / size)


def test_a_shared_link_opens_the_bundled_decoder_offline(app_url, browser_tab):
    """A teacher's link to the causal model: the sidebar names it, the heatmap is lower-triangular."""
    from transformers import AutoTokenizer

    page = browser_tab.page
    text = "It is a truth universally acknowledged"
    page.goto(f"{app_url}/?model=bundled/prose-gpt2&layer=4&head=5&text={text.replace(' ', '+')}")
    wait_for_chart(page)
    assert chart_title(page) == "Attention weights · layer 4 · head 5"
    assert "decoder · 5 layers × 6 heads" in page.locator("[data-testid='stSidebar']").inner_text()
    size = len(AutoTokenizer.from_pretrained(ROOT / "explorer" / "assets" / "prose-gpt2")(text)["input_ids"])
    hover_cell(page, row=size - 1, column=0, size=size)  # below the diagonal: a weight to read
    page.locator(".hoverlayer .hovertext").wait_for(timeout=10_000)
    hover_cell(page, row=0, column=size - 1, size=size)  # above it: masked, so no hover label at all
    page.wait_for_function("() => !document.querySelector('.hoverlayer .hovertext')", timeout=10_000)
    screenshot(page, "attention-heatmaps-decoder.png")
    assert browser_tab.external == []
    assert browser_tab.errors == []
