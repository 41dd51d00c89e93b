"""Results shown in Jupyter as the app's figures: what ``_repr_mimebundle_`` of the data classes returns.

One function, ``mimebundle``, makes the bundle of a figure builder and a summary; ``explorer.views.display`` hands
it each result's page view (``view.figure(result)``: the page's own render function and arguments) and registers
the result's display with ``explorer.data._display``, so the data classes need not import the figures.

Each bundle has three representations; a frontend shows the richest it can:

- ``application/vnd.plotly.v1+json``: the figure as data (JupyterLab, VS Code and Colab draw it natively);
- ``text/html``: the figure drawn by plotly.js. The first figure a kernel displays carries plotly.js itself,
  from the installed plotly package (about 4.6 MB, once per notebook: no CDN, so it works offline); later
  figures use the ``Plotly`` that one defined in the page;
- ``text/plain``: a one-line summary, where nothing can draw.

Nothing here imports IPython: a bundle is a plain dict. The HTML is Plotly's own ``to_html``; its "notebook" renderer
is not used because it adds a MathJax script from a CDN to every figure and sends plotly.js as an output of its own.
"""

from __future__ import annotations

import json
import threading

import plotly.io as pio

from explorer.render.layout import PlotlySpec

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_plotly_js = {"sent": False}
_plotly_js_lock = threading.Lock()


def mimebundle(build, summary: str, include=None, exclude=None) -> dict:
    """The bundle of the figure ``build()`` draws (a view's figure builder, at the screen's look) with ``summary`` as
    its text, with the mime types ``include`` names (all when None) less those ``exclude`` names, as IPython's
    ``_repr_mimebundle_`` is asked for them."""
    bundle = {"text/plain": summary}
    if _wanted(PLOTLY_MIME, include, exclude) or _wanted("text/html", include, exclude):
        figure = build()
        figure = figure.figure() if isinstance(figure, PlotlySpec) else figure  # the validated figure, as exports
        # Through Plotly's own JSON encoder: arrays become typed-array data that Jupyter can send as JSON.
        bundle[PLOTLY_MIME] = json.loads(pio.to_json(figure, validate=False))
        if _wanted("text/html", include, exclude):  # only then is plotly.js spent on this output
            bundle["text/html"] = _html(figure)
    return {mime: value for mime, value in bundle.items() if _wanted(mime, include, exclude)}


def _wanted(mime: str, include, exclude) -> bool:
    return (include is None or mime in include) and not (exclude and mime in exclude)


def _html(figure) -> str:
    with _plotly_js_lock:  # plotly.js goes into exactly one output, the first one
        first, _plotly_js["sent"] = not _plotly_js["sent"], True
    return pio.to_html(figure, include_plotlyjs=first, full_html=False, config={"displaylogo": False})


def reset_plotly_js() -> None:
    """Send plotly.js again with the next figure (a new notebook page, or a test)."""
    with _plotly_js_lock:
        _plotly_js["sent"] = False
