"""The real app in a real browser: `streamlit run app.py` served locally, driven by Debian's Chromium.

Every request that leaves 127.0.0.1 is aborted and recorded, so the test also proves the page needs no
internet (fonts, Plotly's JavaScript and icons all come from the local server). Its screenshots land in
tests/artifacts/screenshots/ (not committed); copy one to docs/screenshots/ to refresh the README's.
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = ROOT / "tests" / "artifacts" / "screenshots" / "attention-heatmaps.png"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_healthy(url: str, server: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"streamlit exited early:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer {url}/_stcore/health within {timeout} s")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """`streamlit run app.py` on a free port, offline; always stopped at the end."""
    port = free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
    ]
    # A file, not a pipe: a pipe nobody reads would stall the server once full.
    with log.open("w") as output:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, server, log)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def browser_tab():
    """A Chromium tab that may only talk to the local server, with what it tried otherwise and its errors."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tab = SimpleNamespace(
                page=browser.new_page(viewport={"width": 1400, "height": 1000}), external=[], errors=[]
            )
            tab.page.route("**/*", lambda route: _local_only(route, tab.external))
            tab.page.on("pageerror", lambda error: tab.errors.append(f"page error: {error}"))
            tab.page.on("console", lambda message: _record_console_error(message, tab.errors))
            yield tab
        finally:
            browser.close()


def _local_only(route, external: list) -> None:
    if urlparse(route.request.url).hostname in LOCAL_HOSTS:
        route.continue_()
    else:
        external.append(route.request.url)
        route.abort()


def _record_console_error(message, errors: list) -> None:
    if message.type == "error":
        errors.append(f"console: {message.text}")


def chart_title(tab) -> str:
    return tab.locator("[data-testid='stPlotlyChart'] .gtitle").text_content()


def test_heatmap_renders_updates_and_needs_no_internet(app_url, browser_tab):
    page = browser_tab.page
    # A shared link: head 1 comes from the URL, as it would for whoever opens it.
    page.goto(f"{app_url}/?head=1", wait_until="domcontentloaded")
    chart = page.locator("[data-testid='stPlotlyChart']")
    chart.locator(".main-svg").first.wait_for(timeout=90_000)
    assert chart.locator(".hm image").count() == 1  # Plotly drew the heatmap's cells
    assert chart_title(page) == "Layer 0 · head 1"
    wait_until_idle(page)

    head = page.get_by_role("group", name="Head").get_by_role("slider")
    head.focus()
    head.press("ArrowRight")
    head.blur()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='stPlotlyChart'] .gtitle\")?.textContent === 'Layer 0 · head 2'",
        timeout=30_000,
    )
    page.wait_for_url("**head=2**", timeout=10_000)  # the new view is a shareable link

    wait_until_idle(page)
    # One caption under the model picker: elements keep their places across reruns, none is left over.
    assert page.locator("[data-testid='stSidebar'] [data-testid='stCaptionContainer']").count() == 1
    hover_cell(page, row=3, column=2, size=7)  # "like" attending to "flies": head 2 looks one token back
    hover = page.locator(".hoverlayer .hovertext").text_content(timeout=10_000)
    assert "query #3 'like' → key #2 'flies'" in hover

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOT, full_page=True)
    assert browser_tab.external == []
    assert browser_tab.errors == []


def wait_until_idle(tab) -> None:
    """Until the script run is over: elements of the previous run are only removed at its end."""
    tab.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=30_000)


def hover_cell(tab, *, row: int, column: int, size: int) -> None:
    """Move the mouse to the centre of one cell of the size x size heatmap."""
    box = tab.locator("[data-testid='stPlotlyChart'] .nsewdrag").first.bounding_box()
    tab.mouse.move(box["x"] + (column + 0.5) * box["width"] / size, box["y"] + (row + 0.5) * box["height"] / size)


def test_a_shared_link_opens_the_bundled_decoder_offline(app_url, browser_tab):
    """A teacher's link to the causal model: the sidebar names it, the heatmap is lower-triangular."""
    from transformers import AutoTokenizer

    page = browser_tab.page
    text = "It is a truth universally acknowledged"
    page.goto(f"{app_url}/?model=bundled/prose-gpt2&layer=4&head=5&text={text.replace(' ', '+')}")
    page.locator("[data-testid='stPlotlyChart'] .main-svg").first.wait_for(timeout=90_000)
    wait_until_idle(page)
    assert chart_title(page) == "Layer 4 · head 5"
    assert "decoder · 5 layers × 6 heads" in page.locator("[data-testid='stSidebar']").inner_text()
    size = len(AutoTokenizer.from_pretrained(ROOT / "explorer" / "assets" / "prose-gpt2")(text)["input_ids"])
    hover_cell(page, row=size - 1, column=0, size=size)  # below the diagonal: a weight to read
    page.locator(".hoverlayer .hovertext").wait_for(timeout=10_000)
    hover_cell(page, row=0, column=size - 1, size=size)  # above it: masked, so no hover label at all
    page.wait_for_function("() => !document.querySelector('.hoverlayer .hovertext')", timeout=10_000)
    page.screenshot(path=SCREENSHOT.with_name("attention-heatmaps-decoder.png"), full_page=True)
    assert browser_tab.external == []
    assert browser_tab.errors == []
