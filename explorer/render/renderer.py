"""Native renderers (kaleido's Chrome, vl-convert) in a worker process, never in the app's own process.

vl-convert is Rust: a label it cannot parse makes it panic inside a function that cannot unwind, which aborts
the whole Python process (measured: one U+0017 in a chart label ended the Streamlit server and every student's
session with it). A browser can hang. So the server never calls them itself: it sends the figure's JSON to a
worker process and waits, with a time limit, for the file. A worker that dies or overruns is killed and replaced;
that export fails with a sentence and the next one works.

The worker keeps one Chrome running (kaleido's) instead of starting a browser per export, so a PNG takes a
fraction of a second instead of seconds. The same Chrome draws whole HTML pages (BertViz's views, which cannot
export themselves): a screenshot for PNG, the page's own <svg> with its styles written in for SVG. A lecture deck's
file is put together here too (``explorer.render.deckfile``): the same Chrome prints the PDF from the slides' SVGs,
python-pptx builds the PPTX, and the offline HTML inlines plotly.js and Vega once.
``EXPLORER_EXPORT_WORKERS`` workers (default 1: each
holds a Chrome, and a 2-core machine draws one image at a time anyway) serve the whole server; requests queue.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

EXPORT_TIMEOUT_S = 30.0  # one export, Chrome's start included
DECK_TIMEOUT_S = 150.0  # a lecture deck's file put together from its drawn slides (a PDF of 19 pages: about 3 s)
QUEUE_TIMEOUT_S = 60.0  # waiting for a free worker


class RenderFailed(RuntimeError):
    """The export could not be made (the renderer failed, died or took too long); the message says which."""


class _DrawingFailed(RenderFailed):
    """The renderer answered with an error: it is still healthy and serves the next export."""


# --- inside the worker process ------------------------------------------------------------------------------


class _Chrome:
    """The worker's one Chrome (kaleido's), driven from an event loop of its own in a background thread: Plotly
    figures go through kaleido, HTML pages (BertViz's views) through a tab of the same browser, so an export of
    either kind costs no browser start after the first."""

    def __init__(self):
        import asyncio

        import kaleido

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="explorer-renderer-chrome").start()
        # Offline: plotly.js from the installed plotly package (kaleido's default), MathJax off (kaleido's
        # default fetches it from a CDN).
        self.kaleido = kaleido.Kaleido(n=1, timeout=EXPORT_TIMEOUT_S, mathjax=False)
        self.run(self.kaleido.open())
        self.tab = None

    def run(self, coroutine, timeout: float = EXPORT_TIMEOUT_S):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)


_chrome: _Chrome | None = None


def _browser() -> _Chrome:
    global _chrome
    if _chrome is None:
        _chrome = _Chrome()
    return _chrome


def _plotly_bytes(spec: str, fmt: str, scale: float, size: tuple[int, int] | None) -> bytes:
    import json

    chrome = _browser()
    figure = json.loads(spec)
    layout = figure.get("layout", {})
    width, height = size or (layout.get("width", 700), layout.get("height", 500))
    options = {"format": fmt, "width": width, "height": height, "scale": scale}
    return chrome.run(chrome.kaleido.calc_fig(figure, opts=options))


def _vega_bytes(spec: str, fmt: str, scale: float, size: tuple[int, int] | None) -> bytes:
    import vl_convert as vlc

    if fmt == "html":
        return vlc.vegalite_to_html(spec, bundle=True).encode()
    svg = vlc.vegalite_to_svg(spec)
    if size is None:
        return vlc.svg_to_png(svg, scale=scale) if fmt == "png" else svg.encode()
    svg = on_canvas(svg, *size)
    return _svg_to_png(svg, size, scale) if fmt == "png" else svg.encode()


# Every outermost <svg> of the page, cloned with its computed presentation styles written on each element, placed
# where the page draws it (CSS zoom included) on a white width x height canvas. Marks the page does not draw
# (hidden, fully transparent: BertViz keeps a line for every head and shows the selected ones) are left out.
_PAGE_SVG_JS = """
(width, height) => {
  const NS = "http://www.w3.org/2000/svg";
  const STYLES = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "stroke-linecap",
    "opacity", "font-family", "font-size", "font-weight", "font-style", "text-anchor", "dominant-baseline"];
  const drawn = (element, style) => style.display !== "none" && style.visibility !== "hidden"
    && parseFloat(style.opacity) > 0
    && !(element.tagName === "line" && parseFloat(style.strokeOpacity) === 0);
  function copy(source) {
    const style = getComputedStyle(source);
    if (!drawn(source, style)) return null;
    const clone = source.cloneNode(false);
    clone.removeAttribute("class");
    clone.setAttribute("style", STYLES.map((name) => `${name}:${style.getPropertyValue(name)}`).join(";"));
    for (const child of source.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) clone.appendChild(child.cloneNode());
      else if (child.nodeType === Node.ELEMENT_NODE) {
        const inner = copy(child);
        if (inner) clone.appendChild(inner);
      }
    }
    return clone;
  }
  const canvas = document.createElementNS(NS, "svg");
  canvas.setAttribute("width", width);
  canvas.setAttribute("height", height);
  canvas.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const background = document.createElementNS(NS, "rect");
  background.setAttribute("width", "100%");
  background.setAttribute("height", "100%");
  background.setAttribute("fill", "white");
  canvas.appendChild(background);
  for (const svg of document.querySelectorAll("svg")) {
    if (svg.parentElement.closest("svg")) continue;
    const box = svg.getBoundingClientRect();
    const placed = box.width > 0 && box.height > 0 && copy(svg);
    if (!placed) continue;
    const zoom = svg.currentCSSZoom || 1;
    for (const [name, value] of [["x", box.left], ["y", box.top], ["width", box.width], ["height", box.height]]) {
      placed.setAttribute(name, value);
    }
    if (!svg.getAttribute("viewBox")) placed.setAttribute("viewBox", `0 0 ${box.width / zoom} ${box.height / zoom}`);
    canvas.appendChild(placed);
  }
  return new XMLSerializer().serializeToString(canvas);
}
"""
# Characters XML 1.0 forbids (a token may hold them): shown as U+FFFD, so the file parses.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _page_bytes(page: str, fmt: str, scale: float, size: tuple[int, int] | None) -> bytes:
    """PNG (``scale`` device pixels per CSS pixel) or SVG of an HTML page (a BertViz view) drawn by the worker's
    Chrome in a ``size`` window, offline."""
    chrome = _browser()
    width, height = size or (1920, 1080)
    return chrome.run(_draw_page(chrome, page, fmt, scale, width, height))


async def _draw_page(chrome: _Chrome, page: str, fmt: str, scale: float, width: int, height: int) -> bytes:
    import base64

    tab = await _load(chrome, page, scale, width, height)
    if fmt == "svg":
        svg = await _evaluate(tab, f"({_PAGE_SVG_JS})({width}, {height})")
        return _NOT_XML.sub("\ufffd", svg).encode()
    clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
    shot = await tab.send_command("Page.captureScreenshot", params={"format": "png", "clip": clip})
    return base64.b64decode(shot["result"]["data"])


async def _load(chrome: _Chrome, page: str, scale: float, width: int, height: int):
    """The worker's one tab, offline, showing ``page`` in a ``width`` x ``height`` window once it has loaded."""
    import asyncio
    import json
    import tempfile

    if chrome.tab is None:
        chrome.tab = await chrome.kaleido.create_tab("about:blank")
        # Nothing leaves the machine: the page carries its scripts, and anything else it asks for fails.
        await chrome.tab.send_command("Network.enable")
        offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        await chrome.tab.send_command("Network.emulateNetworkConditions", params=offline)
        chrome.folder = Path(tempfile.mkdtemp(prefix="explorer-renderer-"))
    tab = chrome.tab
    metrics = {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": False}
    await tab.send_command("Emulation.setDeviceMetricsOverride", params=metrics)
    path = chrome.folder / "page.html"
    path.write_text(page, encoding="utf-8")
    url = f"{path.as_uri()}?{time.monotonic_ns()}"  # a new address each time: the page is loaded, never reused
    await tab.send_command("Page.navigate", params={"url": url})
    ready = (
        f"location.href === {json.dumps(url)} && document.readyState === 'complete'"
        " && document.fonts.status === 'loaded'"
    )
    while not await _evaluate(tab, ready):
        await asyncio.sleep(0.02)
    return tab


async def _print_pdf(chrome: _Chrome, page: str, width: int, height: int) -> bytes:
    """The page printed by the worker's Chrome: one PDF page per CSS page (the page's ``@page`` size), its SVG
    images and text kept as vector drawing and text."""
    import base64

    tab = await _load(chrome, page, 1, width, height)
    margins = {f"margin{side}": 0 for side in ("Top", "Bottom", "Left", "Right")}
    options = {"printBackground": True, "preferCSSPageSize": True, **margins}
    printed = await tab.send_command("Page.printToPDF", params=options)
    return base64.b64decode(printed["result"]["data"])


async def _evaluate(tab, expression: str):
    answer = await tab.send_command("Runtime.evaluate", params={"expression": expression, "returnByValue": True})
    result = answer.get("result", {})
    if "exceptionDetails" in result:
        raise RuntimeError(result["exceptionDetails"].get("text", "the page's script failed"))
    return result.get("result", {}).get("value")


def _svg_to_png(svg: str, size: tuple[int, int], scale: float) -> bytes:
    """The SVG rasterised by the warm Chrome: drawn as the only image of an empty Plotly figure of that size.
    vl-convert's own rasteriser took 1.0-1.8 s for a 3840x2160 slide; Chrome takes about 0.3 s. An SVG drawn as
    an image runs no script and loads nothing."""
    import base64
    import json

    source = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    hidden = {"visible": False, "range": [0, 1]}
    page = {
        "data": [],
        "layout": {
            "width": size[0],
            "height": size[1],
            "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
            "paper_bgcolor": "white",
            "xaxis": hidden,
            "yaxis": hidden,
            "images": [
                {
                    "source": source,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0,
                    "y": 1,
                    "sizex": 1,
                    "sizey": 1,
                    "sizing": "stretch",
                    "xanchor": "left",
                    "yanchor": "top",
                }
            ],
        },
    }
    return _plotly_bytes(json.dumps(page), "png", scale, size)


def on_canvas(svg: str, width: int, height: int) -> str:
    """The SVG fitted and centred on a white ``width`` x ``height`` canvas. Vega sizes a chart by its content:
    a concatenated chart asked for 1920x1080 comes out 1884x1014, and a slide must be exactly the slide's size."""
    import re

    match = re.search(r"<svg\b[^>]*>", svg)
    if match is None:
        return svg
    tag = match.group(0)
    own_width = float(re.search(r'\swidth="([\d.]+)', tag).group(1))
    own_height = float(re.search(r'\sheight="([\d.]+)', tag).group(1))
    tag = re.sub(r'\s(width|height|viewBox)="[^"]*"', "", tag)[:-1]
    inner = (
        f'{tag} width="{width}" height="{height}" viewBox="0 0 {own_width:g} {own_height:g}" '
        'preserveAspectRatio="xMidYMid meet">'
    )
    body = svg[match.end() :].rsplit("</svg>", 1)[0]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><rect width="100%" height="100%" fill="white"/>{inner}{body}</svg></svg>'
    )


@functools.cache
def _deckfile():
    """``explorer.render.deckfile``, loaded from its file beside this one: the worker runs this file as a script,
    without the ``explorer`` package (and with ``PYTHONSAFEPATH`` set, without this folder on ``sys.path``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("explorer_deckfile", Path(__file__).with_name("deckfile.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _deck_bytes(deck: dict, fmt: str, scale: float, size: tuple[int, int] | None) -> bytes:
    """A lecture deck as one PDF, PPTX or HTML file (``explorer.render.deckfile``) from its drawn slides; the PDF
    printed by the worker's Chrome."""
    deckfile = _deckfile()
    if fmt != "pdf":
        return deckfile.assemble(fmt, deck)
    chrome = _browser()
    return chrome.run(_print_pdf(chrome, deckfile.printable(deck), *deckfile.SIZE), DECK_TIMEOUT_S)


_RENDERERS = {"plotly": _plotly_bytes, "vega-lite": _vega_bytes, "page": _page_bytes, "deck": _deck_bytes}


def _read_message(stream):
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("the other side closed the pipe")
    body = stream.read(int.from_bytes(header, "big"))
    return pickle.loads(body)


def _write_message(stream, message) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(body).to_bytes(8, "big") + body)
    stream.flush()


def _serve() -> None:
    """The worker's loop on stdin/stdout: (kind, spec, fmt, scale, size) in; ("ok", bytes) or ("error", text) out."""
    if hasattr(os, "nice"):  # a class's model runs and pages come before an export; Chrome inherits it
        os.nice(10)
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    while True:
        try:
            kind, spec, fmt, scale, size = _read_message(requests)
        except EOFError:
            return
        try:
            answer = ("ok", _RENDERERS[kind](spec, fmt, scale, size))
        except Exception as error:  # reported to the server as a sentence; the worker lives on
            answer = ("error", f"{type(error).__name__}: {str(error)[:300]}")
        try:
            _write_message(channel, answer)
        except OSError:  # the server stopped waiting (its time limit) or exited
            return


# --- in the app's process -----------------------------------------------------------------------------------


class _Worker:
    """One worker process running ``_serve``, spoken to over its stdin and stdout."""

    def __init__(self):
        self.process = subprocess.Popen(
            # This file as a script: the worker imports the renderers only, not the explorer package (torch).
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Its own process group (POSIX), so stopping it also stops the Chrome it started.
            start_new_session=hasattr(os, "killpg"),
        )

    def render(self, request: tuple, timeout: float) -> bytes:
        answer: list = []

        def read():
            try:
                answer.append(_read_message(self.process.stdout))
            except Exception as error:  # the worker died: EOF or a torn message
                answer.append(("died", repr(error)))

        _write_message(self.process.stdin, request)
        reader = threading.Thread(target=read, daemon=True, name="explorer-renderer-read")
        reader.start()
        reader.join(timeout)
        if not answer:
            raise RenderFailed(f"The renderer took longer than {timeout:.0f} s and was stopped.")
        status, payload = answer[0]
        if status == "died":
            raise RenderFailed("The renderer stopped while drawing this figure; the next export starts a new one.")
        if status != "ok":
            raise _DrawingFailed(f"The renderer could not draw this figure ({payload}).")
        return payload

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            if hasattr(os, "killpg"):
                os.killpg(self.process.pid, signal.SIGKILL)  # the worker and its Chrome
            else:
                self.process.kill()
            self.process.wait(5)


class RendererPool:
    """A few worker processes; ``render`` sends one export to a free worker and replaces it if it fails."""

    def __init__(self, size: int = 1, *, timeout: float = EXPORT_TIMEOUT_S):
        self.size = max(1, int(size))
        self.timeout = timeout
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._started = 0
        self._lock = threading.Lock()
        self.waiting = 0

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle.empty() and self._started < self.size:
                self._started += 1
                return _Worker()
            self.waiting += 1
        try:
            return self._idle.get(timeout=QUEUE_TIMEOUT_S)
        except queue.Empty:
            raise RenderFailed("The server is busy drawing other exports: try again in a moment.") from None
        finally:
            with self._lock:
                self.waiting -= 1

    def render(
        self,
        kind: str,
        spec,
        fmt: str,
        scale: float = 1,
        size: tuple[int, int] | None = None,
        *,
        timeout: float | None = None,
    ) -> bytes:
        """``fmt`` ("png" or "svg") of a Plotly figure or Vega-Lite spec given as JSON (``kind`` "plotly" or
        "vega-lite") or of an HTML page (``kind`` "page"), ``size`` in CSS pixels; or a lecture deck's file
        (``kind`` "deck", ``spec`` a dict, see ``explorer.render.deckfile``). ``timeout``: this request's own
        limit, longer than one figure's for a whole deck."""
        worker = self._take()
        try:
            data = worker.render((kind, spec, fmt, scale, size), timeout or self.timeout)
        except _DrawingFailed:
            self._idle.put(worker)
            raise
        except RenderFailed:
            self._replace(worker)
            raise
        except OSError:  # the pipe broke while sending: the worker had died
            self._replace(worker)
            raise RenderFailed(
                "The renderer stopped while drawing this figure; the next export starts a new one."
            ) from None
        self._idle.put(worker)
        return data

    def _replace(self, worker: _Worker) -> None:
        worker.stop()
        self._idle.put(_Worker())

    def warm(self) -> None:
        """Start a worker and its Chrome now (in the background), so the first export does not wait for them."""

        def start():
            with contextlib.suppress(RenderFailed):
                self.render("plotly", '{"data": [], "layout": {"width": 10, "height": 10}}', "png")
                # vl-convert starts its JavaScript engine on its first chart, and bundles the JavaScript its
                # HTML pages inline on its first page (about 1.5 s): both now, in the worker.
                self.render("vega-lite", '{"mark": "point", "data": {"values": [{"a": 1}]}}', "html")
                self.render("vega-lite", '{"mark": "point", "data": {"values": [{"a": 1}]}}', "svg")

        threading.Thread(target=start, daemon=True, name="explorer-renderer-warm").start()

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().stop()
        self._started = 0


def _pool_size() -> int:
    # ASCII digits only (``"²".isdigit()`` is True and int() refuses it); not explorer.checks.whole_number: this
    # file also runs as the worker's script, without the explorer package.
    configured = os.environ.get("EXPLORER_EXPORT_WORKERS", "")
    return int(configured) if re.fullmatch(r"[0-9]{1,3}", configured) and int(configured) > 0 else 1


_POOL: RendererPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> RendererPool:
    """The process's one renderer pool, started on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = RendererPool(_pool_size())
        return _POOL


if __name__ == "__main__":
    _serve()
