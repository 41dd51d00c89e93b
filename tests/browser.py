"""Shared helpers for the real-browser tests: the app served locally, and Chromium tabs that may only talk
to it.

Every request that leaves 127.0.0.1 is aborted and recorded, so a test also proves the page needs no
internet (fonts, Plotly's JavaScript and icons all come from the local server). Screenshots land in
tests/artifacts/screenshots/ (not committed); docs/screenshots/ holds the ones the README shows.
"""

from __future__ import annotations

import contextlib
import os
import re
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
# Debian's build of Chromium's headless shell where tests/run.sh could install it: the same Blink as the full
# browser, without its UI process, as Playwright itself runs headless tests. It drew the drawn-views tests on
# 17% less CPU (124 s against 150 s of both cores, the same 16 tests passing).
CHROMIUM = next(
    (path for path in ("/usr/bin/chromium-headless-shell", "/usr/bin/chromium") if Path(path).exists()),
    "/usr/bin/chromium",
)
SCREENSHOTS = ROOT / "tests" / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
CHART = "[data-testid='stPlotlyChart']"

needs_chromium = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]


def browser_test(function):
    """``needs_chromium`` on one test of a module whose other tests need no browser."""
    for mark in needs_chromium:
        function = mark(function)
    return function


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


def announced_port(server: subprocess.Popen, log: Path, timeout: float = 60) -> int:
    """The port a server started on port 0 was given by the system, as its log announces it.

    Port 0, not ``free_port()``: a port probed free can be handed to another worker's server before this one
    starts, and the health check would then pass on that server (this page testing the wrong app)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := re.search(r"URL: http://127\.0\.0\.1:(\d+)", log.read_text()):
            return int(found[1])
        if server.poll() is not None:
            raise RuntimeError(f"streamlit exited early:\n{log.read_text()}")
        time.sleep(0.2)
    raise TimeoutError(f"streamlit announced no URL within {timeout} s:\n{log.read_text()}")


@contextlib.contextmanager
def served_app(log: Path, *, extra_env: dict | None = None, args: list[str] | None = None, port: int | None = None):
    """`streamlit run app.py` on a port of its own (or ``port``), offline; yields its URL and always stops it."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **(extra_env or {}),
    }
    command = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.port", str(port or 0),
        "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false",
        *(args or []),
    ]  # fmt: skip
    with running_server(command, log, port=port or 0, cwd=ROOT, env=env) as url:
        yield url


@contextlib.contextmanager
def running_server(command: list[str], log: Path, *, port: int, cwd: Path, env: dict, timeout: float = 60):
    """Any command that starts the app on ``port`` (0: a port the system gives it, read from its log): yields its
    URL once healthy, and always stops it."""
    # A file, not a pipe: a pipe nobody reads would stall the server once full.
    with log.open("w") as output:
        server = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port or announced_port(server, log, timeout)}"
        wait_until_healthy(url, server, log, timeout=timeout)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def chromium():
    """A headless Chromium (Debian's), closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_tab(browser, *, width: int = 1400, height: int = 1000, downloads: bool = False) -> SimpleNamespace:
    """A tab in a fresh context that may only talk to localhost, with what it tried otherwise and its errors."""
    context = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=downloads)
    context.add_init_script(_RUN_WATCH)
    tab = SimpleNamespace(page=context.new_page(), context=context, external=[], errors=[])
    tab.page.route("**/*", lambda route: _local_only(route, tab.external))
    tab.page.on("pageerror", lambda error: tab.errors.append(f"page error: {error}"))
    tab.page.on("console", lambda message: _record_console_error(message, tab.errors))
    return tab


def _local_only(route, external: list) -> None:
    if urlparse(route.request.url).hostname in LOCAL_HOSTS or route.request.url.startswith(("data:", "blob:", "file:")):
        route.continue_()
    else:
        external.append(route.request.url)
        route.abort()


# Opened at a page's own path (/greedy_search), Streamlit's frontend first looks for its server under that
# path, gets a 404, then finds it at the root: an expected probe, not an error of the page.
_BASE_URL_PROBES = ("/_stcore/health", "/_stcore/host-config")


def _record_console_error(message, errors: list) -> None:
    if message.type != "error":
        return
    url = (message.location or {}).get("url", "")
    if "404" in message.text and url.endswith(_BASE_URL_PROBES) and urlparse(url).path.count("/") > 2:
        return
    errors.append(f"console: {message.text} ({url})")


def wait_until_idle(page) -> None:
    """Until the script run is over: elements of the previous run are only removed at its end."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)


_CHART_SIZE = """
() => {
  const plot = document.querySelector("[data-testid='stPlotlyChart'] .js-plotly-plot");
  if (plot && plot.layout) return `${plot.layout.width}x${plot.layout.height}`;
  const vega = document.querySelector("[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg");
  return vega ? `${vega.clientWidth}x${vega.clientHeight}` : "";
}
"""
# A Plotly figure drawn, or a Vega-Lite chart (Altair's): the sampling page's first view holds only the latter.
DRAWN_CHART = f"{CHART} .main-svg, [data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] .marks"


# Installed in every tab (``open_tab``): when a script run last started, and when the visitor last did something
# that may start one (a click, a key, a changed field). A run's start flips stApp's data-test-script-state.
_RUN_WATCH = """
(() => {
  window.__explorerRunStartedAt = 0;
  window.__explorerInputAt = 0;
  new MutationObserver((records) => {
    if (records.some((r) => r.target.getAttribute("data-test-script-state") === "running")) {
      window.__explorerRunStartedAt = performance.now();
    }
  }).observe(document, {attributes: true, subtree: true, attributeFilter: ["data-test-script-state"]});
  for (const kind of ["click", "keydown", "change"]) {
    window.addEventListener(kind, () => { window.__explorerInputAt = performance.now(); }, true);
  }
})();
"""

# Settled: no script run, no viewport probe with anything new to say (explorer/ui/figures.py), and whatever may
# have asked for a run since the last one started (the probe's last report, the visitor's last input) either has
# had its run start (and, the app being idle now, end) or was ``quiet`` ms ago, long enough that its run would
# have started by now. In a tab without ``_RUN_WATCH`` (no run start is known) only the time counts.
_SETTLED = """
(quiet) => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
  if ([...(window.__explorerProbes || [])].some((pending) => pending())) return false;
  const asked = Math.max(window.__explorerProbeSentAt || 0, window.__explorerInputAt || 0);
  return (window.__explorerRunStartedAt || 0) > asked || performance.now() - asked > quiet;
}
"""


def wait_until_settled(page, *, quiet: float = 0.8, timeout: float = 60) -> None:
    """Until the page will not run again by itself: its runs are over and its size probes have said all they
    will (the first run of a page draws at a default size, and the probe's report asks for one more). Checked
    twice, a moment apart, in case the last run's end set a probe off."""
    for _ in range(2):
        page.wait_for_function(_SETTLED, arg=quiet * 1000, timeout=timeout * 1000, polling=100)
        time.sleep(0.1)


def wait_for_chart(page) -> None:
    """The chart drawn, and the page settled (see ``wait_until_settled``) with its drawn size steady."""
    page.locator(DRAWN_CHART).first.wait_for(timeout=120_000)
    deadline = time.monotonic() + 30
    while True:
        wait_until_settled(page)
        size = page.evaluate(_CHART_SIZE)
        time.sleep(0.25)  # Plotly draws after the run's elements arrive
        if page.evaluate(_CHART_SIZE) == size or time.monotonic() > deadline:
            return


def chart_title(page) -> str:
    return page.locator(f"{CHART} .gtitle").first.text_content()


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=path)
    return path
