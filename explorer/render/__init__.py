"""The render layer: turns the arrays of ``explorer.data`` into figures and short strings, never calling ``st.*``.

How it works: each figure function takes a data record (or plain arrays from it, or from ``explorer.compute``)
plus ``info`` (what the figure shows: a ``FigureInfo``) and ``look`` (how big: ``SCREEN``,
``presentation_look(...)``, ``SLIDE``), and returns a Plotly figure (or a ``PlotlySpec``, its plain dicts), an
Altair/Vega-Lite chart or an HTML string. So the same function draws the app's figure, a notebook's and a slide's:
a view (``explorer.views``) holds the page's call, which the page hands to ``explorer.ui`` (``show_figure``,
sized to the window, with its export buttons) and Jupyter draws for a result (``notebook``); ``export`` writes
any figure as PNG, SVG or offline HTML through native renderers in a worker process (``renderer``). Token
labels are model output and text is visitor input: everything here escapes them before they reach anything that
interprets HTML. Arrays keep the axis names of ``explorer.data`` ([layer, head, query, key] weights, [vocab]
probabilities).

What each module holds:

- ``style``: the figure conventions (sizes, fonts, colours, titles, file names) and ``finish``; ``layout``: fast
  layout changes (Plotly's own update machinery costs 10x more); ``vega``: Vega-Lite charts built once per size.
- One module per view family: ``heatmap`` (one head's matrices), ``grid`` (every head at once), ``vectors``
  (embeddings, positions, one head step by step), ``decoding`` (candidates, the beam tree, log-probabilities),
  ``sampling`` (the next-token distribution), ``lens``, ``ablation``, ``anatomy``, ``bertviz`` (BertViz's views).
- ``notebook`` (Jupyter's bundles), ``export`` and ``renderer`` (files).

For example::

    from explorer.render import SLIDE, FigureInfo, attention_heatmap, save
    info = FigureInfo("Attention weights", model=lm.name, text=text, where=("layer 2", "head 5"))
    figure = attention_heatmap(cap.main, 2, 5, info=info, look=SLIDE)
    figure.show()
    save(figure, info, "png")   # attention-weights_all-minilm-l6-v2_time-flies-like-an-arrow_layer-2_head-5_….png
"""

from explorer.render.export import save
from explorer.render.heatmap import attention_heatmap, token_matrix
from explorer.render.style import SCREEN, SLIDE, FigureInfo, Look, presentation_look, screen_look

__all__ = [
    "SCREEN",
    "SLIDE",
    "FigureInfo",
    "Look",
    "attention_heatmap",
    "presentation_look",
    "save",
    "screen_look",
    "token_matrix",
]
