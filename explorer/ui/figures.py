"""Showing a figure on a page: sized to the window, with PNG, SVG and HTML exports at slide size.

Pages never size figures themselves. They hand ``show_figure`` a *builder*, a function called with a
``look=`` (pixel size and text sizes) that returns a finished Plotly figure or Altair chart, and the view's
``FigureInfo``. Pages build it with ``figure_builder(render_function, *data, **options)`` (a ``functools.partial``):
it holds only the data it draws. A lambda written at a page's top level would hold the page's whole
namespace (the capture with it) for as long as its export buttons live, forty long captures for a class.
The builder is called:

- for the page, with a look that fits the window: a tiny browser-side probe (a Streamlit v2 component
  placed just above the figure) reports the content width and the room between the figure's top and the
  window's bottom, so tick labels can be thinned for the real pixel size and, in presentation mode, a
  16:9 figure fits the window without scrolling;
- for each export, only when its button is clicked, with ``style.SLIDE`` (1920×1080), so a download is
  laid out for a slide and named after what it shows.

Before the browser has reported (the first run of a session, and in ``AppTest``), a default look is used.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

# pandas is imported here, once, by the server's first run: Altair imports it lazily, and forty sessions drawing
# their first chart at once raced that import ("partially initialized module 'pandas' has no attribute ...").
import pandas  # noqa: F401
import plotly.graph_objects as go
import pyarrow as pa
import streamlit as st

from explorer.render import export, renderer
from explorer.render.layout import PlotlySpec
from explorer.render.style import SLIDE, FigureInfo, Look, look_for
from explorer.render.vega import VegaLite
from explorer.ui.shell import presenting

Builder = Callable[[Look], object]

_PROBE_JS = """
export default function(component) {
  const { setStateValue, parentElement } = component;
  const host = parentElement.host || parentElement;
  let last = "";
  // Rounded to 8 px so that sub-pixel layout jitter never triggers another run.
  const round = (x) => Math.round(x / 8) * 8;
  function scrollOffset(element) {
    let offset = window.scrollY;
    for (let node = element.parentElement; node; node = node.parentElement) {
      const overflow = getComputedStyle(node).overflowY;
      if ((overflow === "auto" || overflow === "scroll") && node.scrollHeight > node.clientHeight) {
        offset += node.scrollTop;
      }
    }
    return offset;
  }
  function measure() {
    const main = document.querySelector('[data-testid="stMainBlockContainer"]');
    const box = host.getBoundingClientRect();
    let content = box.width;
    if (main) {
      const style = getComputedStyle(main);
      content = main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    }
    // The figure's place in the page, not in the window: Streamlit scrolls an inner container, and scrolling
    // must not count as a new room (it would rerun the page while the visitor scrolls, and a rerun
    // invalidates the export buttons just drawn).
    const top = box.top + scrollOffset(host);
    return {width: round(Math.min(content, box.width || content)), room: round(window.innerHeight - top - 24)};
  }
  // Whether a report now would say something new to the server.
  function pending(value = measure()) {
    return value.width > 0 && JSON.stringify(value) !== last;
  }
  function report() {
    // Only between runs: a report while the script runs would interrupt it (a widget changed in that run,
    // such as a clamped head, would then count as the visitor's choice). The timer reports after the run.
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app && app.getAttribute("data-test-script-state");
    if (state && state !== "notRunning") return;
    const value = measure();
    if (!pending(value)) return;
    last = JSON.stringify(value);
    window.__explorerProbeSentAt = performance.now();
    setStateValue("viewport", value);
  }
  // For whoever waits until the page has settled (the browser tests, tests/browser.py): a page whose probes
  // have nothing new to say, and whose last report was answered, will not run again by itself.
  (window.__explorerProbes = window.__explorerProbes || new Set()).add(pending);
  report();
  // The window's size, and the page above the probe: a notice or spinner above it that goes away moves the
  // figure up without resizing the window (the container's size changes, and the timer catches the rest).
  const observer = new ResizeObserver(report);
  observer.observe(document.body);
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  if (main) observer.observe(main);
  const timer = setInterval(report, 1000);
  window.addEventListener("resize", report);
  return () => {
    observer.disconnect();
    clearInterval(timer);
    window.removeEventListener("resize", report);
    window.__explorerProbes.delete(pending);
  };
}
"""
_probe = st.components.v2.component("explorer_viewport_probe", js=_PROBE_JS, html="<span></span>")


def figure_look(key: str, *, tall: bool = False, wide: bool = False) -> Look:
    """The look for the figure drawn next: probes the room where it will sit (see the module docstring).
    ``wide``: see ``style.look_for``."""
    reported = _probe(key=f"{key}-probe", default={"viewport": None}, on_viewport_change=lambda: None, height=0)
    width, room = read_viewport(getattr(reported, "viewport", None))
    return look_for(width, room, presentation=presenting(), tall=tall, wide=wide)


MAX_PIXELS = 10_000  # more than any screen: a larger report was crafted (it would size a figure, and its exports)


def read_viewport(viewport) -> tuple[float | None, float | None]:
    """(content width, room below the figure) from the probe's report, whatever a client sent: a report that is
    not {"width": ..., "room": ...} reads as none, a value that is not a number within ``MAX_PIXELS`` as None
    (the room may be negative: the figure's top below the window's bottom)."""
    if not isinstance(viewport, dict):
        return None, None
    width, room = (_pixels(viewport.get(name)) for name in ("width", "room"))
    return (width if width and width > 0 else None), room


def _pixels(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_PIXELS <= value <= MAX_PIXELS:
        return None
    return value  # NaN fails the comparison above: JSON's NaN and Infinity are refused there too


def figure_builder(render, *args, **kwargs) -> Builder:
    """A builder for ``show_figure``: ``render(*args, look=..., **kwargs)`` when called, holding only its arguments."""
    return functools.partial(render, *args, **kwargs)


def show_figure(
    build: Builder,
    info: FigureInfo,
    *,
    key: str,
    alt: str | None = None,
    select_key: str | None = None,
    tall: bool = False,
    wide: bool = False,
    exports: bool = True,
    shared: Hashable | None = None,
) -> object:
    """Draw ``build(look)`` sized to the window, with export buttons below it; returns the shown figure.

    ``select_key``: a click on a point of a Plotly figure reruns the page with the point in
    ``st.session_state[select_key]`` (a key of its own, which a page may change to clear the selection without
    the figure losing its size). ``tall``: a square matrix in a narrow column, drawn as tall as its width
    allows (``style.taller``). ``wide``: on a projector, the content's whole width (``style.look_for``).
    ``exports``: the export buttons below it (a lecture slide leaves them to the deck's own files, so the figure
    fills the window). ``shared``: what alone decides the figure besides its look (a lecture slide's view): the
    figure is then built once per look for every session of the server (see ``_drawn``)."""
    look = figure_look(key, tall=tall, wide=wide)
    figure, drawn = _drawn(build, look) if shared is None else _shared_drawn(build, look, shared)
    plotly = isinstance(figure, go.Figure | PlotlySpec)
    if plotly:
        config = _plotly_config(info)
        selection = {"on_select": "rerun", "selection_mode": "points"} if select_key else {}
        st.plotly_chart(
            drawn,
            theme=None,
            key=select_key or key,
            width="content",
            alt=alt or info.title(),
            config=config,
            **selection,
        )
    else:
        # The spec, not st.altair_chart: that one validates the chart against the Vega-Lite schema while it holds
        # a lock shared by every session (Altair's settings are global), so a class's charts queued behind
        # each other (0.2 s each); the chart's own builder is the only source of specs here. Streamlit changes
        # the spec's top level: each run gets its own shallow copy.
        st.vega_lite_chart(dict(drawn), theme=None, key=key, width="content")
    if exports:
        export_buttons(build, info, key=key, plotly=plotly)
    return figure


def _drawn(build: Builder, look: Look) -> tuple[object, object]:
    """(the figure, what Streamlit's chart element is handed for it)."""
    figure = build(look=look)
    if isinstance(figure, PlotlySpec):
        return figure, _AsBuilt(figure)
    return figure, figure if isinstance(figure, go.Figure) else _vega_spec(figure)


# A class following its teacher reruns forty pages on the same slide at once. Building the slide's figure was half
# of each of those runs (Plotly validates every property it is given): built once per look and kept, each run
# only hands the finished spec on. The spec is never changed once built (Streamlit copies what it changes).
SHARED_FIGURES = 32
SHARED_WAIT = 30.0  # seconds a session waits for another's build of the same figure before building it itself
_shared: OrderedDict = OrderedDict()
_building: dict = {}  # (shared, look) -> set when the session building it is done
_shared_lock = threading.Lock()


def _shared_drawn(build: Builder, look: Look, shared: Hashable) -> tuple[object, object]:
    # Built by one session at a time: the class's forty runs start together, and each building the figure it
    # found missing cost as much as having no cache (the others wait for the first, a fraction of a second).
    key = (shared, look)
    while True:
        with _shared_lock:
            if key in _shared:
                _shared.move_to_end(key)
                return _shared[key]
            building = _building.get(key)
            mine = building is None
            if mine:
                building = _building[key] = threading.Event()
        if not mine:
            building.wait(SHARED_WAIT)  # then read it, or build it here if that build failed
            continue
        try:
            return _keep_shared(key, *_drawn(build, look))
        finally:
            with _shared_lock:
                _building.pop(key, None)
            building.set()


def _keep_shared(key, figure, drawn) -> tuple[object, object]:
    if isinstance(drawn, go.Figure) and not isinstance(drawn, _AsBuilt):
        drawn = _AsBuilt.of(drawn.to_dict())  # what Streamlit would take of it, taken once
    with _shared_lock:
        _shared[key] = (figure, drawn)
        while len(_shared) > SHARED_FIGURES:
            _shared.popitem(last=False)
    return figure, drawn


class _AsBuilt(go.Figure):
    """What ``st.plotly_chart`` gets for a ``PlotlySpec``: given a dict, Streamlit validates it into a figure
    again; given a figure, it takes ``to_dict()`` and reads nothing else, here the spec as plotly.js will read
    it. Plotly's own initialisation (an empty figure, 0.3 ms) is skipped: nothing here uses it."""

    def __init__(self, spec: PlotlySpec):  # super().__init__ deliberately not called
        self._sent = spec.sent()

    @classmethod
    def of(cls, sent: dict) -> _AsBuilt:
        """One for a figure's spec already taken (``Figure.to_dict()``)."""
        shown = cls.__new__(cls)
        shown._sent = sent
        return shown

    def to_dict(self) -> dict:
        return self._sent


def _vega_spec(figure) -> dict:
    """The chart's spec for ``st.vega_lite_chart``, its named datasets as Arrow tables: given rows, Streamlit
    builds a pandas DataFrame per dataset on the way to Arrow (3 ms a chart, at every slider move of every
    student: issue 13). Streamlit changes only the spec's top level, so a shallow copy of ours is enough."""
    spec = dict(figure.spec) if isinstance(figure, VegaLite) else figure.to_dict(validate=False)
    if "datasets" in spec:
        spec["datasets"] = {name: pa.Table.from_pylist(rows) for name, rows in spec["datasets"].items()}
    return spec


def export_buttons(build: Builder, info: FigureInfo, *, key: str, plotly: bool = True) -> None:
    """PNG (2x), SVG and offline HTML of the figure at 1920×1080, made only when a button is clicked."""
    stem = info.file_stem()
    images_problem = _images_problem() if plotly else None
    with st.container(horizontal=True, gap="small"):
        for fmt in export.FORMATS:
            unavailable = images_problem if fmt != "html" else None
            st.download_button(
                _EXPORT_LABELS[fmt],
                data=_exporter(build, info, fmt),
                file_name=f"{stem}.{fmt}",
                mime=export.MIME[fmt],
                key=f"{key}-export-{fmt}",
                on_click="ignore",
                icon=":material/download:",
                help=unavailable or _EXPORT_HELP[fmt],
                disabled=unavailable is not None,
            )


_EXPORT_HELP = {
    "png": "1920×1080 slide, drawn at 2x (3840×2160 pixels). The server draws one image at a time: the button "
    "spins while yours waits.",
    "svg": "1920×1080 vector image: sharp at any size, editable. The server draws one image at a time.",
    "html": "interactive, standalone: opens offline in any browser",
}


_EXPORT_LABELS = {"png": "PNG", "svg": "SVG", "html": "HTML"}


@functools.cache  # not st.cache_resource: a visitor's clear-cache request must not restart the renderer
def _images_problem() -> str | None:
    """Checked once per server: whether a browser for PNG/SVG export exists here. When it does, the renderer
    worker and its Chrome start now, in the background, so the first click does not wait for them."""
    problem = export.image_export_problem()
    if problem is None:
        renderer.pool().warm()
    return problem


def _exporter(build: Builder, info: FigureInfo, fmt: str) -> Callable[[], bytes]:
    # Runs on the server when the button is clicked (the button spins meanwhile, also while other exports are
    # ahead in the queue). A failure (RenderFailed: the renderer worker failed, died or overran; it is replaced)
    # shows under the button as "Failed to generate file for download" and leaves the page and server as they were.
    def make() -> bytes:
        return export.export(build(look=SLIDE), fmt, title=f"{info.title()} — {info.subtitle()}")

    return make


def _plotly_config(info: FigureInfo) -> dict:
    # The toolbar's camera saves a slide-sized PNG in the browser, named like the server's exports.
    return {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": "png",
            "filename": info.file_stem(),
            "width": SLIDE.width,
            "height": SLIDE.height,
            "scale": 2,
        },
    }
