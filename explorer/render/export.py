"""Figures as files for slides: PNG (at 2x), SVG and standalone interactive HTML that works offline.

Every export is drawn at slide size (1920×1080 by default), not at the shape of the browser window:
the render function is called again with ``style.SLIDE``, so labels are laid out for the slide. A lecture deck's
file draws each view at the size of its box on the page (``size``): the figure is never scaled afterwards.

- Plotly: PNG and SVG come from Kaleido, which drives a local Chrome or Chromium (no internet; the
  plotly.js it uses ships with the plotly package). HTML inlines plotly.js (about 4.7 MB), so the file
  opens offline anywhere.
- Altair: vl-convert renders PNG and SVG without a browser, on a canvas of exactly the slide's size; HTML
  inlines the Vega JavaScript it carries.

- Whole HTML pages (BertViz's views: ``HtmlFigure``): PNG is a screenshot and SVG the page's own <svg>,
  both by the worker's Chrome at slide size; HTML is the page itself.

Every HTML export fits the window it is opened in: the slide is scaled as a whole, keeping its aspect and its
layout (a 1920×1080 page opened on a 1280×720 screen is shown at 1280×720, not cut off on the right).

The native renderers run in a worker process (``explorer.render.renderer``): a renderer that aborts or hangs
fails one export with a ``RenderFailed`` sentence, never the process that asked for it.

``ExportUnavailable`` says what is missing when a format cannot be made on this machine.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from explorer.render import renderer
from explorer.render.layout import PlotlySpec
from explorer.render.renderer import RenderFailed
from explorer.render.style import SLIDE

PNG_SCALE = 2
FORMATS = ("png", "svg", "html")
MIME = {"png": "image/png", "svg": "image/svg+xml", "html": "text/html"}
__all__ = ["FORMATS", "MIME", "ExportUnavailable", "HtmlFigure", "RenderFailed", "export", "fitted", "save"]


@dataclass(frozen=True)
class HtmlFigure:
    """A figure that is a whole HTML page laid out at slide size (BertViz's views), scripts inlined."""

    html: str


# Scales the page's content as one block so that it fits the window, keeping its aspect: the layout stays the
# slide's (labels where they were placed for 1920×1080), only the scale changes. Plotly and Vega (SVG renderer)
# and BertViz find their marks under a CSS transform, so hover and clicks still work. The body's content is moved
# into the scaled block by the script itself (the last thing in the body), so the page's own markup is left as it
# was: a "<body>" inside the page's bundled JavaScript cannot be mistaken for the page's body.
_FIT = """<script>
(function () {
  const style = document.createElement("style");
  style.textContent = "body { margin: 0; } #explorer-frame { overflow: hidden; margin: 0 auto; } "
    + "#explorer-fit { display: inline-block; transform-origin: 0 0; }";
  document.head.appendChild(style);
  const frame = document.createElement("div"), fit = document.createElement("div");
  frame.id = "explorer-frame";
  fit.id = "explorer-fit";
  while (document.body.firstChild) fit.appendChild(document.body.firstChild);
  frame.appendChild(fit);
  document.body.appendChild(frame);
  function resize() {
    const width = fit.offsetWidth, height = fit.offsetHeight;  // the layout's size, before any scaling
    if (!width || !height) return;
    const scale = Math.min(document.documentElement.clientWidth / width, window.innerHeight / height);
    fit.style.transform = "scale(" + scale + ")";
    frame.style.width = width * scale + "px";
    frame.style.height = height * scale + "px";
  }
  new ResizeObserver(resize).observe(fit);
  window.addEventListener("resize", resize);
  resize();
})();
</script>"""


def fitted(page: str) -> str:
    """The HTML page with its body's content scaled to fit the window it is opened in (see ``_FIT``)."""
    end = page.lower().rfind("</body>")
    return page + _FIT if end < 0 else page[:end] + _FIT + page[end:]


class ExportUnavailable(RuntimeError):
    """This machine cannot make the requested format; the message says what to install."""


def image_export_problem() -> str | None:
    """Why Plotly figures cannot be drawn as PNG/SVG on this machine, or None when they can."""
    try:
        from choreographer.browsers.chromium import Chromium
    except ImportError:
        return "PNG and SVG export needs the `kaleido` package (`pip install kaleido`)."
    if Chromium.find_browser(skip_local=False) is None:
        return (
            "PNG and SVG export needs Chrome or Chromium on the machine running the app "
            "(for example `apt install chromium`). The camera button in the chart's toolbar saves a PNG "
            "from your browser instead."
        )
    return None


def plotly_image(figure, fmt: str) -> bytes:
    """PNG (twice the figure's size in pixels) or SVG of a Plotly figure, drawn by a local browser."""
    problem = image_export_problem()
    if problem:
        raise ExportUnavailable(problem)
    scale = PNG_SCALE if fmt == "png" else 1
    return renderer.pool().render("plotly", figure.to_json(validate=False), fmt, scale)


def plotly_html(figure, *, title: str | None = None) -> str:
    """A standalone HTML page of the figure, interactive, with plotly.js inlined (no network needed)."""
    page = figure.to_html(
        include_plotlyjs=True,
        full_html=True,
        config={"displaylogo": False, "responsive": True},
        validate=False,
    )
    if title:
        page = page.replace("<head>", f"<head><title>{html.escape(title)}</title>", 1)
    return fitted(page)


def altair_image(chart, fmt: str, size: tuple[int, int] | None = None) -> bytes:
    """PNG (at 2x) or SVG of an Altair chart on a ``size`` canvas (the slide's by default), rendered by vl-convert
    (no browser, no network)."""
    try:
        import vl_convert  # noqa: F401 - only to say what is missing before starting a worker
    except ImportError as error:
        raise ExportUnavailable("Altair export needs `vl-convert-python`.") from error
    scale = PNG_SCALE if fmt == "png" else 1
    spec = chart.to_json(validate=False, indent=None)
    return renderer.pool().render("vega-lite", spec, fmt, scale, size=size or (SLIDE.width, SLIDE.height))


def altair_html(chart, *, title: str | None = None) -> str:
    """A standalone HTML page of the chart with Vega, Vega-Lite and vega-embed inlined, made by vl-convert in
    the renderer worker (its JavaScript engine never runs in the app's process)."""
    spec = chart.to_json(validate=False, indent=None)
    page = renderer.pool().render("vega-lite", spec, "html").decode()
    return fitted(_titled(page, title))


def _titled(page: str, title: str | None) -> str:
    if title:
        page = re.sub(r"<title>.*?</title>", "", page, count=1, flags=re.S)
        page = page.replace("<head>", f"<head><title>{html.escape(title)}</title>", 1)
    return page


def page_image(figure: HtmlFigure, fmt: str, size: tuple[int, int] | None = None) -> bytes:
    """PNG (at 2x) or SVG of a page figure, drawn by the renderer worker's Chrome in a ``size`` window (the
    slide's by default: the size the page was laid out at)."""
    problem = image_export_problem()
    if problem:
        raise ExportUnavailable(problem)
    scale = PNG_SCALE if fmt == "png" else 1
    return renderer.pool().render("page", figure.html, fmt, scale, size=size or (SLIDE.width, SLIDE.height))


def save(figure, info, fmt: str = "png", folder: str | Path = ".") -> Path:
    """Write the figure as ``<info.file_stem()>.<fmt>`` in ``folder`` and return the path (for notebooks)."""
    path = Path(folder) / f"{info.file_stem()}.{fmt}"
    path.write_bytes(export(figure, fmt, title=f"{info.title()} — {info.subtitle()}"))
    return path


def export(figure, fmt: str, *, title: str | None = None, size: tuple[int, int] | None = None) -> bytes:
    """The figure (Plotly, Altair or an ``HtmlFigure``) in ``fmt`` ("png", "svg" or "html") as bytes ready to
    download. ``size``: the CSS pixels an Altair chart's canvas or a page figure's window takes, where the figure
    was drawn for a look of that size (a Plotly figure carries its own size)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {FORMATS}")
    if isinstance(figure, HtmlFigure):
        return fitted(_titled(figure.html, title)).encode() if fmt == "html" else page_image(figure, fmt, size)
    if isinstance(figure, PlotlySpec):
        figure = figure.figure()
    is_plotly = hasattr(figure, "to_image")
    if fmt == "html":
        page = plotly_html(figure, title=title) if is_plotly else altair_html(figure, title=title)
        return page.encode()
    return plotly_image(figure, fmt) if is_plotly else altair_image(figure, fmt, size)
