"""The attention pages in a real browser, offline: each view renders, the BertViz frames draw their lines with
no internet, and hostile text stays text."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.browser import CHART, needs_chromium, open_tab, screenshot, wait_for_chart, wait_until_settled

pytestmark = needs_chromium
XSS = "</script><img src=x onerror=alert(1)> [click](javascript:alert(2))"


def _open(browser, url: str, *, height: int = 1600, chart: bool = True):
    tab = open_tab(browser, width=1400, height=height)
    tab.dialogs = []
    tab.page.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    tab.page.goto(url)
    if chart:
        wait_for_chart(tab.page)
    else:
        tab.page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=120_000)
        wait_until_settled(tab.page)
    return tab


def _done(tab, name: str) -> None:
    screenshot(tab.page, name)
    assert tab.external == [], tab.external
    assert tab.errors == [], tab.errors
    assert tab.dialogs == [], tab.dialogs
    tab.context.close()


@pytest.mark.parametrize(
    ("path", "name", "charts"),
    [
        ("tokens_embeddings", "tokens-embeddings.png", 4),
        ("model_anatomy", "model-anatomy.png", 1),
        ("attention_step_by_step?head=8&query=2", "attention-step-by-step.png", 1),
        ("neuron_view?head=8&query=2", "neuron-view.png", 1),
        ("heads_overview", "all-heads.png", 1),
        ("head_statistics", "head-statistics.png", 2),
        ("compare_attention", "compare.png", 2),
    ],
)
def test_attention_pages_render(browser, app_url, path, name, charts):
    tab = _open(browser, f"{app_url}/{path}", height=2400)
    assert tab.page.locator(f"{CHART} .main-svg").count() >= charts
    _done(tab, name)


@pytest.mark.parametrize("view", ["head", "model"])
def test_bertviz_frames_draw_offline(browser, app_url, view):
    tab = _open(browser, f"{app_url}/bertviz_views?pair=fruit+flies+like+a+banana&bv_view={view}", chart=False)
    frame = tab.page.frame_locator("iframe").first
    frame.locator("svg").first.wait_for(timeout=30_000)
    lines = frame.locator("svg line, svg path")
    assert lines.count() > 50  # BertViz drew its attention lines
    if view == "head":
        assert frame.locator("#filter option").count() == 5  # All, A→A, B→B, A→B, B→A
    _done(tab, f"bertviz-{view}-view.png")


def test_bertviz_head_view_draws_any_layer(browser, app_url):
    """A link to a later layer (only that layer is sent) draws its lines; it once drew nothing (a script error)."""
    tab = _open(browser, f"{app_url}/bertviz_views?bv_view=head&bv_layer=3", chart=False)
    frame = tab.page.frame_locator("iframe").first
    frame.locator("svg line").first.wait_for(state="attached", timeout=30_000)
    assert frame.locator("svg line").count() > 20
    assert frame.locator("#layer").input_value() == "3"
    assert tab.errors == []


def test_hostile_text_stays_text_in_every_view(browser, app_url):
    """Through a link: no dialog, no injected image, the text shown literally (heatmap labels, BertViz frame)."""
    for path in ("", "bertviz_views", "greedy_search?model=bundled/prose-llama&prompt="):
        separator = "&" if "?" in path else "?"
        target = f"{app_url}/{path}{'' if path.endswith('=') else separator + 'text='}{quote(XSS)}"
        tab = _open(browser, target, chart=path != "bertviz_views")
        page = tab.page
        assert page.locator("img[src='x']").count() == 0
        assert page.locator("a[href^='javascript']").count() == 0
        if path == "bertviz_views":
            frame = page.frame_locator("iframe").first
            frame.locator("svg").first.wait_for(timeout=30_000)
            assert frame.locator("img").count() == 0
            drawn = frame.locator("svg").first.text_content()
            assert "</script>" in drawn and "alert(1)" in drawn  # the tokens are drawn as text
        else:
            assert "onerror=alert(1)" in page.locator("[data-testid='stMain']").inner_text()
        _done(tab, f"hostile-text{('-' + path.split('?')[0]) if path else ''}.png")
