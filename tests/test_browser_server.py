"""The server as a class meets it, in a real browser: crafted links stay harmless, the first paint is the app's
frame with a loading state, and a server restart keeps each visitor on their page with their text.

Times are recorded (printed, and written to tests/artifacts/cold-start.json), never asserted: machines differ.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from tests.browser import (
    CHART,
    ROOT,
    free_port,
    needs_chromium,
    open_tab,
    served_app,
    wait_for_chart,
    wait_until_idle,
)

pytestmark = needs_chromium
PHISHING = "x` [Your session expired, log in again](https://evil.example/login) ![i](https://evil.example/i.png) `"
TIMES = ROOT / "tests" / "artifacts" / "cold-start.json"
MENU = ".st-key-menu"  # the app's own menu (explorer/ui/navigation.py); Streamlit's is switched off
# Streamlit's list of the pages/ folder, were it ever shown: file names, not the app's titles.
SHARED_LINK = "/beam_search?model=bundled/prose-gpt2&beams=3"  # a teacher's link from before issue 41: it loads
RAW_NAMES = ("head ablation", "attention heatmaps", "View 8 more", "heads overview", "bertviz views")


def _record(name: str, seconds: float) -> None:
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    times[name] = round(seconds, 2)
    TIMES.write_text(json.dumps(times, indent=2))
    print(f"{name}: {seconds:.2f} s")


@pytest.fixture(scope="module")
def crafted_links_server(tmp_path_factory):
    """A server of this module's own for the crafted links, its first visitor the first crafted link: the other tests
    here start servers of their own (a cold start, a restart), and the worker's shared one has served others."""
    with served_app(tmp_path_factory.mktemp("crafted") / "server.log") as url:
        yield url


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (f"model={quote(PHISHING)}", "Your session expired, log in again"),
        ("model=" + quote("a/b/c d!"), "neither a Hugging Face Hub id"),
        ("model=" + "x" * 5000, "too long"),
        ("layer=999&head=-1", "Layer 999 does not exist here"),
    ],
)
def test_crafted_links_show_literal_text_and_a_valid_view(browser, crafted_links_server, query, expected):
    tab = open_tab(browser)  # a visitor of their own: a fresh session
    tab.page.goto(f"{crafted_links_server}/?{query}")
    wait_for_chart(tab.page)
    page = tab.page
    body = page.locator("[data-testid='stApp']").inner_text()
    assert expected in body, page.locator("[data-testid='stSidebar']").inner_text()  # where the refusal is said
    assert page.locator("a[href*='evil.example'], img[src*='evil.example']").count() == 0
    assert "Traceback" not in body
    assert page.locator(f"{CHART} .main-svg").count() >= 1  # a valid view all the same
    assert tab.external == [] and tab.errors == []
    tab.context.close()


def test_after_a_restart_each_visitor_keeps_their_page_and_text(browser, tmp_path):
    port = free_port()
    text = "the students kept their own sentence"
    tab = open_tab(browser)
    with served_app(tmp_path / "first.log", port=port) as url:
        tab.page.goto(f"{url}/attention_step_by_step?text={quote(text)}&head=3")
        wait_for_chart(tab.page)
    with served_app(tmp_path / "second.log", port=port):
        start = time.monotonic()
        tab.page.wait_for_function(
            f"() => document.querySelector('{MENU}')?.innerText.includes('Attention step')",
            timeout=60_000,
        )
        wait_until_idle(tab.page)
        wait_for_chart(tab.page)
        _record("after a restart: chart again", time.monotonic() - start)
        assert "/attention_step_by_step" in tab.page.url
        nav = tab.page.locator(MENU).inner_text()
        assert "pages" not in nav.lower() and "attention heatmaps" not in nav.split("\n")[0].lower()
        assert tab.page.locator("textarea").first.input_value() == text
        assert "head 3" in tab.page.locator(f"{CHART} .gtitle").first.text_content()
    tab.context.close()


@pytest.mark.parametrize("path", ["/", SHARED_LINK])
def test_from_the_first_paint_a_fresh_server_shows_the_app_never_its_file_names(browser, tmp_path, path):
    """Polled from the first paint after a server start until the chart is drawn: never Streamlit's list of the
    pages/ folder's file names; once anything is painted, the app's loading line or its own menu. A shared link to
    a decoding page is a cold start too: its times are recorded, and its menu names the page."""
    with served_app(tmp_path / "server.log") as url:
        tab = open_tab(browser)
        tab.page.goto(f"{url}{path}", wait_until="commit")
        seen, start = [], time.monotonic()
        painted_at = None
        while time.monotonic() - start < 120:
            seen.append(
                tab.page.evaluate(
                    """() => ({
                        text: [...document.querySelectorAll("[data-testid='stMain'], [data-testid='stSidebar']")]
                            .map((element) => element.innerText).join(" | "),
                        streamlitNav: !!document.querySelector("[data-testid='stSidebarNav']"),
                        menu: !!document.querySelector(".st-key-menu"),
                        chart: !!document.querySelector("[data-testid='stPlotlyChart'] .main-svg"),
                    })"""
                )
            )
            if painted_at is None and (seen[-1]["text"].strip() or seen[-1]["menu"]):
                painted_at = time.monotonic() - start
            if seen[-1]["chart"]:
                break
            time.sleep(0.05)
        assert seen[-1]["chart"], "the page was never drawn"
        if path == SHARED_LINK:
            _record("shared link: app frame painted", painted_at)
            _record("shared link: first chart", time.monotonic() - start)
            nav = tab.page.locator(MENU).inner_text()
            assert "Decoding" in nav and "Beam search" in nav and "app" not in nav.split()
        assert not any(snapshot["streamlitNav"] for snapshot in seen)
        assert not [name for snapshot in seen for name in RAW_NAMES if name in snapshot["text"]]
        painted = [s for s in seen if s["text"].strip()]
        assert painted and all("Starting the Attention" in s["text"] or s["menu"] for s in painted)
        assert any("Starting the Attention" in s["text"] for s in painted)  # the first seconds are said
        loading = sum("Starting the Attention" in s["text"] for s in painted)
        print(f"{len(seen)} snapshots, {len(painted)} painted, {loading} with the loading line")
        assert tab.external == [] and tab.errors == []
        tab.context.close()
